"""The reference side of tests/parity/test_a2v_parity.py's LTX-2.5 case (1.2.0's `A2VidPipelineTwoStage`): the tiny
transformer file built by 1.2.0's builder; stage 1 with `GuidedDenoiser` (the video guider with the negative
context, the audio guider `MultiModalGuiderParams()` without one), the video from noise and the audio
`ModalitySpec(frozen=True, noise_scale=0.0, initial_latent=...)`; stage 2 with `SimpleDenoiser` from the stage-1
video re-noised to the first stage-2 sigma (same size here: no upsampler between), the audio frozen again; both run
by `euler_denoising_loop` with `EulerDiffusionStep`, as `DiffusionStage.__call__` runs them. The noise of each
state is the test's tensor in place of GaussianNoiser's draw."""

import torch
from exchange import TensorNoiser, inputs, outputs
from ltx_core.components.diffusion_steps import EulerDiffusionStep
from ltx_core.components.guiders import MultiModalGuider, MultiModalGuiderParams
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import LTXModelConfigurator, X0Model
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
from ltx_core.tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.utils.blocks import _build_state
from ltx_pipelines.utils.constants import STAGE_2_DISTILLED_SIGMAS
from ltx_pipelines.utils.denoisers import GuidedDenoiser, SimpleDenoiser
from ltx_pipelines.utils.samplers import euler_denoising_loop
from ltx_pipelines.utils.types import ModalitySpec

t, case = inputs()
cpu, f32 = torch.device("cpu"), torch.float32



builder = SingleGPUModelBuilder(model_class_configurator=LTXModelConfigurator, model_path=case["path"],
                                model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)
transformer = X0Model(builder.build(device=cpu, dtype=f32).eval())
shape = VideoPixelShape(batch=1, frames=case["frames"], height=case["height"], width=case["width"], fps=case["fps"])
video_tools = VideoLatentTools(VideoLatentPatchifier(patch_size=1), VideoLatentShape.from_pixel_shape(shape),
                               case["fps"])
audio_tools = AudioLatentTools(AudioPatchifier(patch_size=1), AudioLatentShape.from_video_pixel_shape(shape))
vctx, actx = t["positive_video"], t["positive_audio"]
g = case["video_guidance"]
video_guider = MultiModalGuider(MultiModalGuiderParams(
    cfg_scale=g["cfg"], stg_scale=g["stg"], stg_blocks=g["stg_blocks"], rescale_scale=g["rescale"],
    modality_scale=g["modality"]), negative_context=t["negative_video"])
frozen_audio = ModalitySpec(context=actx, frozen=True, noise_scale=0.0, initial_latent=t["audio_latent"])
out = {}

video = _build_state(ModalitySpec(context=vctx), video_tools, TensorNoiser(t["noise_video_1"]), f32, cpu)
audio = _build_state(frozen_audio, audio_tools, TensorNoiser(t["noise_audio_1"]), f32, cpu)
denoiser = GuidedDenoiser(v_context=vctx, a_context=actx, video_guider=video_guider,
                          audio_guider=MultiModalGuider(params=MultiModalGuiderParams()))
sigmas = LTX2Scheduler().execute(steps=case["steps"]).to(dtype=f32, device=cpu)
video, audio = euler_denoising_loop(sigmas=sigmas, video_state=video, audio_state=audio,
                                    stepper=EulerDiffusionStep(), transformer=transformer, denoiser=denoiser)
stage_1 = video_tools.unpatchify(video_tools.clear_conditioning(video)).latent
out["stage_1.video"] = stage_1
out["stage_1.audio"] = audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent

sigmas = STAGE_2_DISTILLED_SIGMAS.to(dtype=f32, device=cpu)
spec = ModalitySpec(context=vctx, noise_scale=sigmas[0].item(), initial_latent=stage_1)
video = _build_state(spec, video_tools, TensorNoiser(t["noise_video_2"]), f32, cpu)
audio = _build_state(frozen_audio, audio_tools, TensorNoiser(t["noise_audio_2"]), f32, cpu)
video, audio = euler_denoising_loop(sigmas=sigmas, video_state=video, audio_state=audio,
                                    stepper=EulerDiffusionStep(), transformer=transformer,
                                    denoiser=SimpleDenoiser(vctx, actx))
out["stage_2.video"] = video_tools.unpatchify(video_tools.clear_conditioning(video)).latent
out["stage_2.audio"] = audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent
outputs(out)
