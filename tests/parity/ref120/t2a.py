"""The reference side of tests/parity/test_t2a_parity.py: ltx-core 1.2.0's LTXModel run audio-only (`video=None`),
as ltx-pipelines 1.2.0's T2AOneStagePipeline runs it.

* forward: per structure (an LTXModelConfigurator build of the whole file, and an LTXAudioOnlyModelConfigurator
  build with the audio-only key map, the pipeline's own), one forward per case: the audio velocity.
* loop: the pipeline's sampling of `DiffusionStage.__call__` with `video=None`: the audio state from
  `AudioLatentShape.from_video_pixel_shape` (placeholder 512x512), noised by a `GaussianNoiser` on a generator seeded
  with the test's seed (its first draw is the audio's), then `euler_denoising_loop` with `FactoryGuidedDenoiser(
  v_context=None, ...)` and the audio guider only; also the `LTX2Scheduler` sigmas of the test's step count."""

import torch
from exchange import inputs, outputs
from ltx_core.components.diffusion_steps import EulerDiffusionStep
from ltx_core.components.guiders import MultiModalGuiderParams, create_multimodal_guider_factory
from ltx_core.components.noisers import GaussianNoiser
from ltx_core.components.patchifiers import AudioPatchifier
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.guidance.perturbations import BatchedPerturbationConfig, Perturbation, PerturbationConfig
from ltx_core.guidance.perturbations import PerturbationType as T
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import (
    LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP,
    LTXAudioOnlyModelConfigurator,
    LTXModelConfigurator,
    Modality,
    X0Model,
)
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
from ltx_core.tools import AudioLatentTools
from ltx_core.types import AudioLatentShape, VideoPixelShape
from ltx_pipelines.utils.denoisers import FactoryGuidedDenoiser
from ltx_pipelines.utils.helpers import create_noised_state
from ltx_pipelines.utils.samplers import euler_denoising_loop

t, settings = inputs()
cpu, f32 = torch.device("cpu"), torch.float32
BUILDS = {"whole": (LTXModelConfigurator, LTXV_MODEL_COMFY_RENAMING_MAP),
          "audio_only": (LTXAudioOnlyModelConfigurator, LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP)}


def load(path: str, build: str):
    configurator, sd_ops = BUILDS[build]
    builder = SingleGPUModelBuilder(model_class_configurator=configurator, model_path=path, model_sd_ops=sd_ops)
    model = builder.build(device=cpu, dtype=f32).eval()
    missing = [name for name, p in model.named_parameters() if p.is_meta]
    if missing:  # the loader is strict=False: a key the file misses would stay on meta
        raise SystemExit(f"{path} ({build}): weights missing from the file: {missing[:5]}")
    return model


def perturbation(kind: str, block: int) -> PerturbationConfig:
    if kind == "stg":
        return PerturbationConfig([Perturbation(T.SKIP_AUDIO_SELF_ATTN, [block])])
    return PerturbationConfig.empty()


out = {}
for name, (path, build) in settings["forward_models"].items():
    model = load(path, build)
    for case, kinds in settings["cases"].items():
        c = {key: t[f"{case}.{key}"] for key in ("alat", "actx", "asigma", "at")}
        b = c["alat"].shape[0]
        audio = Modality(c["alat"], c["asigma"], c["at"].unsqueeze(-1), t["apos"].expand(b, -1, -1, -1), c["actx"])
        perturbations = BatchedPerturbationConfig([perturbation(k, settings["stg_block"]) for k in kinds],
                                                  model.num_blocks, cpu, f32)
        video_out, out[f"{name}.{case}.audio"] = model(None, audio, perturbations)
        assert video_out is None

loop = settings["loop"]
out["sigmas"] = LTX2Scheduler().execute(steps=loop["steps"]).to(f32)
transformer = X0Model(load(loop["path"], "whole"))
shape = VideoPixelShape(batch=1, frames=loop["frames"], height=512, width=512, fps=loop["fps"])
tools = AudioLatentTools(AudioPatchifier(patch_size=1), AudioLatentShape.from_video_pixel_shape(shape))
noiser = GaussianNoiser(generator=torch.Generator(device=cpu).manual_seed(loop["seed"]))
state = create_noised_state(tools, [], noiser, f32, cpu)
g = loop["guidance"]
params = MultiModalGuiderParams(cfg_scale=g["cfg"], stg_scale=g["stg"], rescale_scale=g["rescale"],
                                modality_scale=1.0, stg_blocks=g["stg_blocks"])
denoiser = FactoryGuidedDenoiser(v_context=None, a_context=t["positive_audio"], video_guider_factory=None,
                                 audio_guider_factory=create_multimodal_guider_factory(params, t["negative_audio"]))
video_state, state = euler_denoising_loop(t["sigmas"], None, state, EulerDiffusionStep(), transformer, denoiser)
assert video_state is None
out["loop.audio"] = tools.unpatchify(tools.clear_conditioning(state)).latent
outputs(out)
