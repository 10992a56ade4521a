"""The reference side of tests/parity/test_pipelines120_parity.py: ltx-pipelines 1.2.0's pipelines run through their
own `__call__` on the tiny LTX-2.5 release (tests/support/release25.py), in fp32, with their own noise.

What is changed around a pipeline, and why:
* fp32: the pipelines hard-code `torch.bfloat16` (`self.dtype`, the `dtype` of `__call__`); the pipeline module's
  `torch` is a view of torch whose `bfloat16` is float32, so every block is built, and every condition encoded, in
  fp32 (`_float32`).
* the prompt encoder: 1.2.0's own Gemma 4 build fails on the tiny text config (docs/ltx25/text.md §1), so the block
  returns the contexts the test sends (ours, which tests/parity/test_gemma4_parity.py compares with 1.2.0's);
* the decoders: replaced by recorders of the latents `__call__` hands them (what it would decode and return), and
  each stage by a recorder of the states it returns;
* res_2s (`two_stage_hq`): `res2s_audio_video_denoising_loop` rounds its state to `model_dtype`, a keyword whose
  default `torch.bfloat16` is bound when `ltx_pipelines.utils.samplers` is imported (out of `_float32`'s reach):
  the HQ module's name for the loop is rebound to the loop with `model_dtype=torch.float32`;
* LoRA fusion: as shipped (`bf16_fuse_rule`, which rounds every fused weight to bf16 even in an fp32 pipeline), or
  with the same rule aggregating in fp32 (settings `fuse`: "bf16" / "fp32").

Per case (settings `cases`): `pipeline` (two_stage, two_stage_hq, ic_lora, distilled, retake, a2v, dubit, keyframes),
its `__call__` keywords, the contexts' names in the inputs. Outputs per case: `stage1.video` / `.audio` (and `stage2.*`: each stage's result in
the order they ran), `out.video` and `out.audio` (the latents the decoders were given; a2v: `out.sound`, the input
sound it returns).
Automatic length (tests/parity/test_duration120_parity.py): pipelines t2a and one_stage, `num_frames` given as a dict
(an AutoDuration's bounds), and `stageN.frames`, the frame count each stage was given (the head's choice).
"""

import functools

import torch
from exchange import Float32Torch, guider_params, inputs, outputs
from ltx_core.loader import LoraPathStrengthAndSDOps
from ltx_core.loader.fuse_loras import FuseRule, _bf16_fuse
from ltx_core.loader.sd_ops import LTXV_LORA_COMFY_RENAMING_MAP
from ltx_pipelines import (a2vid_two_stage, distilled, dubit, ic_lora, keyframe_interpolation, retake, t2a_one_stage,
                           ti2vid_one_stage, ti2vid_two_stages, ti2vid_two_stages_hq)
from ltx_pipelines.utils import samplers
from ltx_pipelines.utils.args import ImageConditioningInput
from ltx_pipelines.utils.model_paths import ModelPaths
from ltx_pipelines.utils.types import AutoDuration

t, settings = inputs()
cpu = torch.device("cpu")
files = settings["files"]



for module in (a2vid_two_stage, distilled, dubit, ic_lora, keyframe_interpolation, retake, t2a_one_stage,
               ti2vid_one_stage, ti2vid_two_stages, ti2vid_two_stages_hq):
    module.torch = Float32Torch("torch")
ti2vid_two_stages_hq.res2s_audio_video_denoising_loop = functools.partial(  # its bf16 default bound at import
    samplers.res2s_audio_video_denoising_loop, model_dtype=torch.float32)


class Context:
    def __init__(self, video, audio):
        self.video_encoding, self.audio_encoding = video, audio


class Prompts:
    """The prompt encoder block, answering with the test's contexts in the order asked."""

    def __init__(self, names):
        self.names = names

    def __call__(self, prompts, **_):
        return [Context(t[f"{name}.video"], t[f"{name}.audio"]) for name in self.names[:len(prompts)]]


class Recorder:
    """Stands in for a decoder (records the latent it is given) or wraps a stage (records what it returns)."""

    def __init__(self, out, name, stage=None, decoder=None):
        self.out, self.name, self.stage = out, name, stage
        self.checkpoint_path = getattr(decoder, "checkpoint_path", None)
        self.diffvae_optimization = getattr(decoder, "diffvae_optimization", None)

    def __getattr__(self, name):  # a stage's other attributes (HQ reads its video_scale_factors)
        stage = self.__dict__.get("stage")
        if stage is None:
            raise AttributeError(name)
        return getattr(stage, name)

    def __call__(self, *args, **kwargs):
        if self.stage is None:
            self.out[self.name] = args[0].clone()
            return iter(())
        video, audio = self.stage(*args, **kwargs)
        calls = 1 + sum(key.endswith(".calls") for key in self.out)  # stages in the order they ran: stage1, stage2
        self.out[f"stage{calls}.calls"] = torch.tensor(calls)
        if "frames" in kwargs:  # the clip's frame count the pipeline chose (an AutoDuration's prediction)
            self.out[f"stage{calls}.frames"] = torch.tensor(kwargs["frames"])
        for key, state in (("video", video), ("audio", audio)):
            if state is not None:
                self.out[f"stage{calls}.{key}"] = state.latent.clone()
        return video, audio


class HeadRecorder:
    """Wraps a DurationPredictor's head: records the seconds it predicts and which contexts it was given."""

    def __init__(self, out, head):
        self.out, self.head = out, head

    def __call__(self, video, audio):
        seconds = self.head(video, audio)
        self.out["head.seconds"] = seconds.clone()
        self.out["head.given"] = torch.tensor([video is not None, audio is not None])
        return seconds


def lora(path, strength=1.0):
    return LoraPathStrengthAndSDOps(path, strength, LTXV_LORA_COMFY_RENAMING_MAP)


def paths(transformer):
    return ModelPaths.from_split(transformer_path=files[transformer], text_encoder_path=files["text_encoder"],
                                 video_vae_path=files["vae"], audio_vae_path=files["audio_vae"],
                                 duration_head_path=files.get("duration_head"))


def build(case):
    kind = case["pipeline"]
    if kind == "two_stage":
        pipe = ti2vid_two_stages.TI2VidTwoStagesPipeline(paths("dev"), [lora(files["distilled_lora"])],
                                                         files["upsampler"], [], device=cpu)
    elif kind == "two_stage_hq":  # the distilled LoRA at 0.25 in stage 1 and 0.5 in stage 2 (hq_2_stage_arg_parser)
        pipe = ti2vid_two_stages_hq.TI2VidTwoStagesHQPipeline(paths("dev"), [lora(files["distilled_lora"])], 0.25, 0.5,
                                                              files["upsampler"], (), device=cpu)
    elif kind == "ic_lora":
        pipe = ic_lora.ICLoraPipeline(paths("distilled"), files["upsampler"], [lora(case["ic_lora"])], device=cpu)
    elif kind == "distilled":
        pipe = distilled.DistilledPipeline(paths("distilled"), files["upsampler"], [], device=cpu)
    elif kind == "a2v":
        pipe = a2vid_two_stage.A2VidPipelineTwoStage(paths("dev"), [lora(files["distilled_lora"])],
                                                     files["upsampler"], [], device=cpu)
    elif kind == "dubit":
        pipe = dubit.DubItPipeline(paths("distilled"), files["upsampler"], lora(case["ic_lora"]), device=cpu)
    elif kind == "keyframes":
        pipe = keyframe_interpolation.KeyframeInterpolationPipeline(paths("dev"), [lora(files["distilled_lora"])],
                                                                    files["upsampler"], [], device=cpu)
    elif kind == "retake":
        pipe = retake.RetakePipeline(paths("dev"), [], device=cpu, distilled=False)
    elif kind == "t2a":
        pipe = t2a_one_stage.T2AOneStagePipeline(paths(case.get("transformer", "dev")), [], device=cpu)
    elif kind == "one_stage":
        pipe = ti2vid_one_stage.TI2VidOneStagePipeline(paths("dev"), [], device=cpu)
    else:
        raise SystemExit(f"unknown pipeline {kind}")
    if settings["fuse"] == "fp32":  # the shipped rule, aggregating the LoRA deltas in fp32
        for name in ("stage", "stage_1", "stage_2"):
            if hasattr(pipe, name):
                stage = getattr(pipe, name)
                rule = FuseRule(aggregation_dtype=torch.float32, fuse_fn=_bf16_fuse)
                setattr(pipe, name, stage.with_builder(stage._transformer_builder.with_fuse_rule(rule)))
    return pipe


def call_arguments(case):
    kwargs = dict(case["call"])
    if case["pipeline"] != "t2a":
        kwargs["tiling_config"] = None  # the decoders are recorders: no tiles to plan
    if isinstance(kwargs.get("num_frames"), dict):  # an automatic length: AutoDuration's bounds
        kwargs["num_frames"] = AutoDuration(**kwargs["num_frames"])
    for key in ("video_guider_params", "audio_guider_params"):
        if key in kwargs:
            kwargs[key] = guider_params(kwargs[key])
    if "images" in kwargs:
        kwargs["images"] = [ImageConditioningInput(*image) for image in kwargs["images"]]
    return kwargs


out = {}
for name, case in settings["cases"].items():
    pipe = build(case)
    record = {}
    pipe.prompt_encoder = Prompts(case["contexts"])
    for stage in ("stage", "stage_1", "stage_2"):
        if hasattr(pipe, stage):
            setattr(pipe, stage, Recorder(record, stage, stage=getattr(pipe, stage)))
    if hasattr(pipe, "video_decoder"):  # text to audio has none
        pipe.video_decoder = Recorder(record, "out.video", decoder=pipe.video_decoder)
    pipe.audio_decoder = Recorder(record, "out.audio")
    if getattr(pipe, "duration_predictor", None) is not None:
        pipe.duration_predictor._head = HeadRecorder(record, pipe.duration_predictor._head)
    with torch.inference_mode():
        returned = pipe(**call_arguments(case))
    if case["pipeline"] == "a2v":  # it returns the input sound itself, not a decoded latent
        record["out.sound"] = returned[1].waveform.clone()
    out |= {f"{name}.{key}": value for key, value in record.items()}
outputs(out)
