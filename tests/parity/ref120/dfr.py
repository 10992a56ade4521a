"""The reference side of tests/parity/test_dfr_pipeline_parity.py: ltx-pipelines 1.2.0's `DFRPipeline` through its
own `__call__` on the tiny LTX-2.5 release with the dev transformer rewritten with the keyframe embedding
(`use_keyframes_abs_pos_embedding`), the distilled LoRA, the tiny detailing IC-LoRA and the tiny temporal upsampler,
fp32 (the module's `torch` sees bfloat16 as float32, as pipelines.py does), no quantization, `tiling_config=None`;
LoRAs fused by the shipped rule aggregating in fp32 (as pipelines.py's "fp32": the same fusion as ours).

The prompt encoder answers with the test's contexts (pipelines.py's `Prompts`). Every stage call is recorded in the
order it ran (stage 1, stage 2 through `stage_detailing`, then each round's tiles through `stage`): the video latent,
the audio latent (none for the tiles) and the generated keyframes. The decoders are recorders of the latents handed
to them; the audio decoder returns a silent waveform of the length the latent decodes to, so the cut runs."""

from functools import partial

import torch
from exchange import Float32Torch, inputs, outputs
from ltx_core.loader import LoraPathStrengthAndSDOps
from ltx_core.loader.fuse_loras import FuseRule, _bf16_fuse
from ltx_core.loader.sd_ops import LTXV_LORA_COMFY_RENAMING_MAP
from ltx_core.types import Audio
from ltx_pipelines import dfr_pipeline
from ltx_pipelines.utils.args import ImageConditioningInput
from ltx_pipelines.utils.model_paths import ModelPaths

t, settings = inputs()
cpu = torch.device("cpu")
files = settings["files"]



dfr_pipeline.torch = Float32Torch("torch")
# the ancestral loop keeps its latents in `model_dtype` (bf16 by default): fp32 here, as everything else
dfr_pipeline.euler_ancestral_denoising_loop = partial(dfr_pipeline.euler_ancestral_denoising_loop,
                                                      model_dtype=torch.float32)


class Context:
    def __init__(self, video, audio):
        self.video_encoding, self.audio_encoding = video, audio


class Prompts:
    def __call__(self, prompts, **_):
        return [Context(t["positive.video"], t["positive.audio"])]


class Stage:
    """Wraps a stage and records what each call returns, numbering the calls in the order they ran."""

    def __init__(self, out, stage):
        self.out, self.stage = out, stage

    def __call__(self, *args, **kwargs):
        video, audio = self.stage(*args, **kwargs)
        n = sum(key.endswith(".video") and key.startswith("call") for key in self.out)
        self.out[f"call{n}.video"] = video.latent.clone()
        if audio is not None:
            self.out[f"call{n}.audio"] = audio.latent.clone()
        if video.generated_keyframes is not None:
            self.out[f"call{n}.keyframes"] = video.generated_keyframes.clone()
        return video, audio

    def __getattr__(self, name):
        return getattr(self.stage, name)


class Decoder:
    def __init__(self, out, name, decoder, rate=None):
        self.out, self.name, self.rate = out, name, rate
        self.checkpoint_path = getattr(decoder, "checkpoint_path", None)
        self.diffvae_optimization = getattr(decoder, "diffvae_optimization", None)

    def __call__(self, latent, *args, **kwargs):
        self.out[self.name] = latent.clone()
        if self.rate is None:
            return iter(())
        samples = settings["audio_samples"]
        return Audio(waveform=torch.zeros(2, samples), sampling_rate=self.rate)


def lora(path, strength=1.0):
    return LoraPathStrengthAndSDOps(path, strength, LTXV_LORA_COMFY_RENAMING_MAP)


out = {}
model_paths = ModelPaths.from_split(transformer_path=files["dev"], text_encoder_path=files["text_encoder"],
                                    video_vae_path=files["vae"], audio_vae_path=files["audio_vae"])
pipe = dfr_pipeline.DFRPipeline(model_paths, [lora(files["distilled_lora"])], files["upsampler"], [],
                                detailing_lora=[lora(settings["detailing"])] if settings["detailing"] else None,
                                temporal_upsampler_path=files["temporal_upsampler"], device=cpu, quantization=None)
out["detailing_downscale"] = torch.tensor(pipe._detailing_downscale)
rule = FuseRule(aggregation_dtype=torch.float32, fuse_fn=_bf16_fuse)
for name in ("stage", "stage_detailing"):
    stage = getattr(pipe, name)
    setattr(pipe, name, Stage(out, stage.with_builder(stage._transformer_builder.with_fuse_rule(rule))))
pipe.prompt_encoder = Prompts()
pipe.video_decoder = Decoder(out, "out.video", pipe.video_decoder)
pipe.audio_decoder = Decoder(out, "out.audio", pipe.audio_decoder, rate=settings["audio_rate"])
call = dict(settings["call"], tiling_config=None)
call["images"] = [ImageConditioningInput(*image) for image in call["images"]]
with torch.inference_mode():
    _, audio, frames, _ = pipe(**call)
out["out.frames"] = torch.tensor(frames)
out["out.audio_samples"] = torch.tensor(audio.waveform.shape[-1])
outputs(out)
