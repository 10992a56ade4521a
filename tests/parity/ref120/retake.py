"""The reference side of tests/parity/test_retake_parity.py's LTX-2.5 cases (1.2.0's `RetakePipeline` with both
streams regenerated in [start, end)): per case, the tiny transformer file built by 1.2.0's builder; each stream's
state from `ModalitySpec(conditionings=[TemporalRegionMask(start, end, fps)], initial_latent=...)` (`_build_state`,
the test's noise tensors in place of GaussianNoiser's draws; a silent file: the audio from noise, no conditioning),
the schedule as the pipeline picks it (DISTILLED_SIGMAS or LTX2Scheduler), `GuidedDenoiser` with a
MultiModalGuider per modality (negative contexts) or `SimpleDenoiser`, then `euler_denoising_loop` with
`EulerDiffusionStep`, as `DiffusionStage.__call__` runs them. Returns the initial masks and states too."""

import torch
from exchange import TensorNoiser, guider, inputs, outputs
from ltx_core.components.diffusion_steps import EulerDiffusionStep
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.conditioning.types.noise_mask_cond import TemporalRegionMask
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import LTXModelConfigurator, X0Model
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
from ltx_core.tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.utils.blocks import _build_state
from ltx_pipelines.utils.constants import DISTILLED_SIGMAS
from ltx_pipelines.utils.denoisers import GuidedDenoiser, SimpleDenoiser
from ltx_pipelines.utils.samplers import euler_denoising_loop
from ltx_pipelines.utils.types import ModalitySpec

t, settings = inputs()
cpu, f32 = torch.device("cpu"), torch.float32
out = {}



models = {}
for name, case in settings["cases"].items():
    path = case["path"]
    if path not in models:
        builder = SingleGPUModelBuilder(model_class_configurator=LTXModelConfigurator, model_path=path,
                                        model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)
        models[path] = X0Model(builder.build(device=cpu, dtype=f32).eval())
    transformer = models[path]
    shape = VideoPixelShape(batch=1, frames=case["frames"], height=case["height"], width=case["width"], fps=case["fps"])
    video_tools = VideoLatentTools(VideoLatentPatchifier(patch_size=1), VideoLatentShape.from_pixel_shape(shape),
                                   case["fps"])
    audio_tools = AudioLatentTools(AudioPatchifier(patch_size=1), AudioLatentShape.from_video_pixel_shape(shape))
    vctx, actx = t[f"{case['text']}.positive_video"], t[f"{case['text']}.positive_audio"]
    region = [TemporalRegionMask(start_time=case["span"][0], end_time=case["span"][1], fps=case["fps"])]
    video = _build_state(ModalitySpec(context=vctx, conditionings=region, initial_latent=t[f"{name}.video_latent"]),
                         video_tools, TensorNoiser(t[f"{name}.noise_video"]), f32, cpu)
    sound = case["sound"]
    audio_spec = ModalitySpec(context=actx, conditionings=region if sound else [],
                              initial_latent=t[f"{name}.audio_latent"] if sound else None)
    audio = _build_state(audio_spec, audio_tools, TensorNoiser(t[f"{name}.noise_audio"]), f32, cpu)
    out |= {f"{name}.video_mask": video.denoise_mask.clone(), f"{name}.audio_mask": audio.denoise_mask.clone(),
            f"{name}.video_start": video.latent.clone(), f"{name}.audio_start": audio.latent.clone()}
    if case["distilled"]:
        sigmas = DISTILLED_SIGMAS
        denoiser = SimpleDenoiser(v_context=vctx, a_context=actx)
    else:
        sigmas = LTX2Scheduler().execute(steps=case["steps"])
        video_params, audio_params = case["guidance"]
        denoiser = GuidedDenoiser(
            v_context=vctx, a_context=actx,
            video_guider=guider(video_params, t[f"{case['text']}.negative_video"]),
            audio_guider=guider(audio_params, t[f"{case['text']}.negative_audio"]))
    sigmas = sigmas.to(dtype=f32, device=cpu)
    video, audio = euler_denoising_loop(sigmas=sigmas, video_state=video, audio_state=audio,
                                        stepper=EulerDiffusionStep(), transformer=transformer, denoiser=denoiser)
    out[f"{name}.video"] = video_tools.unpatchify(video_tools.clear_conditioning(video)).latent
    out[f"{name}.audio"] = audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent
outputs(out)
