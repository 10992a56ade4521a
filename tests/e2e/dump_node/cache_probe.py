"""Test-only nodes for the EasyCache side-by-side test (tests/e2e/test_native_cache.py), never shipped.

E2E Copy Input: see the class.
E2E Forward Probe: the MODEL with a diffusion-model wrapper added after any others (so inside EasyCache's): every
forward that really runs appends its σ to output/<name>.txt, so a test reads which steps ComfyUI computed.
E2E Our Noise: a NOISE whose seed our sampler takes and whose noise is the one our sampler draws from that seed
(torch.Generator on the CPU, video tokens (1, F·H·W, 128) then audio tokens (1, T, 8·16), fp32), laid out as
ComfyUI's [video, audio] latent: so ComfyUI's sampler and ours start from the same noise."""

import os

import comfy.nested_tensor
import comfy.patcher_extension
import folder_paths
import torch


class E2EForwardProbe:
    CATEGORY = "testing"
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "probe"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "name": ("STRING", {"default": "forwards"})}}

    def probe(self, model, name):
        path = os.path.join(folder_paths.get_output_directory(), f"{name}.txt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path):
            os.remove(path)

        def record(executor, *args, **kwargs):
            options = args[-1] if isinstance(args[-1], dict) else kwargs.get("transformer_options") or args[-2]
            with open(path, "a") as out:
                out.write(f"{float(options['sigmas'][0])!r}\n")
            return executor(*args, **kwargs)

        model = model.clone()
        model.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "e2e_probe", record)
        return (model,)


class E2ECopyInput:
    """The MODEL with a diffusion-model wrapper that hands the wrappers after it a copy of the input. ComfyUI casts
    its input to the model's dtype before the diffusion model (`xc.to(dtype)`): a copy for bf16 / fp8 weights, the
    input itself for the fp32 tiny model, and EasyCache adds its diff to that input in place, which ComfyUI's
    denoised then reads. Placed before EasyCache, this gives the CPU test the copy a bf16 model gets."""

    CATEGORY = "testing"
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "wrap"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def wrap(self, model):
        def copy(executor, *args, **kwargs):
            x = args[0]
            x = [t.clone() for t in x] if isinstance(x, list) else x.clone()
            return executor(x, *args[1:], **kwargs)

        model = model.clone()
        model.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "e2e_copy", copy)
        return (model,)


class OurNoise:
    def __init__(self, seed):
        self.seed = seed

    def generate_noise(self, input_latent):
        video, audio = input_latent["samples"].unbind()
        generator = torch.Generator("cpu").manual_seed(self.seed)
        frames, rows, cols = video.shape[2:]
        v = torch.randn((1, frames * rows * cols, 128), generator=generator, dtype=torch.float32)
        a = torch.randn((1, audio.shape[2], audio.shape[1] * audio.shape[3]), generator=generator, dtype=torch.float32)
        v = v.transpose(1, 2).unflatten(2, (frames, rows, cols))
        a = a.unflatten(2, (audio.shape[1], audio.shape[3])).transpose(1, 2)
        return comfy.nested_tensor.NestedTensor([v, a])


class E2EOurNoise:
    CATEGORY = "testing"
    RETURN_TYPES = ("NOISE",)
    FUNCTION = "noise"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seed": ("INT", {"default": 0})}}

    def noise(self, seed):
        return (OurNoise(seed),)
