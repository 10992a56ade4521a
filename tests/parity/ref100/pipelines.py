"""The reference side of tests/parity/test_pipelines100_parity.py: ltx-pipelines 1.0.0's `TI2VidTwoStagesPipeline`
and `KeyframeInterpolationPipeline` (what LTX-2.0 and 2.3 follow, docs/references.md) run through their own
`__call__` on a tiny single-file checkpoint, in fp32, with its own noise.

What is changed around the pipeline, and why:
* fp32: the pipeline hard-codes `torch.bfloat16`; its module's `torch` is a view of torch whose `bfloat16` is
  float32, so every model is built, and every image encoded, in fp32;
* LoRA fusion: 1.0.0 fuses into bf16 and fp8 weights only and refuses fp32 ones; an fp32 weight goes through its bf16
  rule, whose arithmetic (the delta, computed in the weights' dtype, added to the weight) does not depend on it;
* `torch.cuda.synchronize` (between stages) is a no-op: there is no GPU here;
* the prompts: `encode_prompts` returns the test's contexts (ours; the text path's parity is its own test), and the
  model ledger gets no Gemma folder, so it builds no text encoder;
* the decoders: `vae_decode_video` / `vae_decode_audio` record the latents the pipeline hands them;
* `TI2VidTwoStagesHQPipeline` (case `pipeline` "two_stage_hq"): the same changes, and its res_2s loop bound with
  `model_dtype=torch.float32` (the loop's bf16 default is bound at import, out of `_Float32Torch`'s reach).

Per case (settings `cases`): the pipeline (`two_stage`, the default, `keyframes` or `two_stage_hq`), the checkpoint, upsampler and
distilled LoRA files, the `__call__` keywords. Outputs:
`<case>.out.video` and `<case>.out.audio`.
"""

import functools
import types

import torch
from exchange import guider_params, inputs, outputs
from ltx_core.loader import LoraPathStrengthAndSDOps, fuse_loras
from ltx_core.loader.sd_ops import LTXV_LORA_COMFY_RENAMING_MAP
from ltx_pipelines import keyframe_interpolation, ti2vid_two_stages, ti2vid_two_stages_hq
from ltx_pipelines.utils import samplers
from ltx_pipelines.utils.args import ImageConditioningInput

t, settings = inputs()
cpu = torch.device("cpu")


class _Float32Torch(types.ModuleType):
    """torch as the pipeline module sees it, with bfloat16 meaning float32."""

    bfloat16 = torch.float32

    def __getattr__(self, name):
        return getattr(torch, name)


ti2vid_two_stages.torch = keyframe_interpolation.torch = ti2vid_two_stages_hq.torch = _Float32Torch("torch")
ti2vid_two_stages_hq.res2s_audio_video_denoising_loop = functools.partial(
    samplers.res2s_audio_video_denoising_loop, model_dtype=torch.float32)
PIPELINES = {"two_stage": (ti2vid_two_stages, "TI2VidTwoStagesPipeline"),
             "keyframes": (keyframe_interpolation, "KeyframeInterpolationPipeline"),
             "two_stage_hq": (ti2vid_two_stages_hq, "TI2VidTwoStagesHQPipeline")}
torch.cuda.synchronize = lambda *args, **kwargs: None
_fuse = fuse_loras._fuse_deltas


def _fuse_fp32(deltas, weight, key, sd, target_dtype, *args):
    if deltas is not None and weight.dtype == torch.float32:
        return fuse_loras._fuse_delta_with_bfloat16(deltas, weight, key, target_dtype)
    return _fuse(deltas, weight, key, sd, target_dtype, *args)


fuse_loras._fuse_deltas = _fuse_fp32


class Context:
    def __init__(self, video, audio):
        self.video_encoding, self.audio_encoding = video, audio


out = {}
for name, case in settings["cases"].items():
    module, pipeline_class = PIPELINES[case.get("pipeline", "two_stage")]
    module.encode_prompts = lambda prompts, *a, **k: [
        Context(t[f"{name}.{which}.video"], t[f"{name}.{which}.audio"]) for which in ("positive", "negative")]
    module.vae_decode_video = lambda latent, *a, **k: out.__setitem__(f"{name}.out.video", latent.clone())
    module.vae_decode_audio = lambda latent, *a, **k: out.__setitem__(f"{name}.out.audio", latent.clone())
    lora = LoraPathStrengthAndSDOps(case["distilled_lora"], 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
    if module is ti2vid_two_stages_hq:  # the distilled LoRA at 0.25 in stage 1 and 0.5 in stage 2 (hq_2_stage_arg_parser)
        pipe = module.TI2VidTwoStagesHQPipeline(case["checkpoint"], [lora], 0.25, 0.5, case["upsampler"], None, (),
                                                device=cpu)
    else:
        pipe = getattr(module, pipeline_class)(case["checkpoint"], [lora], case["upsampler"], None, [], device=cpu)
    call = dict(case["call"])
    call["images"] = [ImageConditioningInput(*image) for image in call["images"]]
    for key in ("video_guider_params", "audio_guider_params"):
        call[key] = guider_params(call[key])
    with torch.inference_mode():
        pipe(**call)
outputs(out)
