"""Test-only ComfyUI node (never shipped, never in the pack's NODE_CLASS_MAPPINGS): the e2e conftest links this
folder into the test server's custom_nodes so a test can read the values a graph made. E2E Save Tensors writes a
LATENT (its video and audio, nested or not), an IMAGE, an AUDIO and a FLOAT to output/<name>.safetensors (written
to a temporary name, then renamed), listed in the prompt's outputs for the client to download. The EasyCache
side-by-side test's probe and noise nodes: cache_probe.py."""

import os

import folder_paths
import torch
from safetensors.torch import save_file


class E2ESaveTensors:
    CATEGORY = "testing"
    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"name": ("STRING", {"default": "tensors"})},
                "optional": {"latent": ("LATENT",), "images": ("IMAGE",), "audio": ("AUDIO",),
                             "fps": ("FLOAT", {"forceInput": True})}}

    def save(self, name, latent=None, images=None, audio=None, fps=None):
        tensors = {}
        if latent is not None:
            samples = latent["samples"]
            parts = samples.unbind() if getattr(samples, "is_nested", False) is True and not isinstance(
                samples, torch.Tensor) else [samples]
            keys = ("video", "audio") if len(parts) == 2 else ("audio",) if samples.ndim == 4 else ("video",)
            tensors |= dict(zip(keys, parts))
        if images is not None:
            tensors["images"] = images
        if audio is not None:
            tensors["waveform"] = audio["waveform"]
            tensors["sample_rate"] = torch.tensor(audio["sample_rate"])
        if fps is not None:
            tensors["fps"] = torch.tensor(float(fps), dtype=torch.float64)
        file = f"{name}.safetensors"
        os.makedirs(folder_paths.get_output_directory(), exist_ok=True)  # absent until something saves
        path = os.path.join(folder_paths.get_output_directory(), file)
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, path + ".part")
        os.replace(path + ".part", path)
        return {"ui": {"tensors": [{"filename": file, "subfolder": "", "type": "output"}]}}


from .cache_probe import E2ECopyInput, E2EForwardProbe, E2EOurNoise  # noqa: E402

NODE_CLASS_MAPPINGS = {"E2ESaveTensors": E2ESaveTensors, "E2EForwardProbe": E2EForwardProbe,
                       "E2EOurNoise": E2EOurNoise, "E2ECopyInput": E2ECopyInput}
