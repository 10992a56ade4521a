"""The reference side of tests/parity/test_transformer25_loop_parity.py: the 1.2.0 pipelines' sampling loop over
the tiny 2.5 transformer file (1.2.0's builder and LTXModel), per case: states from the latent tools with the
case's images applied (`combined_image_conditionings`' items) and the test's noise tensors in place of the pipeline's
GaussianNoiser draws (same lerps), then `euler_denoising_loop` with `FactoryGuidedDenoiser` (one-stage, stage 1 of
two-stage) or `SimpleDenoiser` (stage 2, distilled), or `euler_ancestral_denoising_loop` (2.5's distilled stage 1),
as `DiffusionStage.__call__` runs them; the final latents, conditioning tokens dropped."""

import torch
from exchange import TensorNoiser, inputs, outputs
from ltx_core.components.diffusion_steps import EulerAncestralDiffusionStep, EulerDiffusionStep
from ltx_core.components.guiders import MultiModalGuiderParams, create_multimodal_guider_factory
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.conditioning.types.keyframe_cond import VideoConditionByKeyframeIndex
from ltx_core.conditioning.types.latent_cond import VideoConditionByLatentIndex
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import LTXModelConfigurator, X0Model
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
from ltx_core.tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.utils.denoisers import FactoryGuidedDenoiser, SimpleDenoiser
from ltx_pipelines.utils.helpers import create_noised_state
from ltx_pipelines.utils.samplers import euler_ancestral_denoising_loop, euler_denoising_loop

t, settings = inputs()
builder = SingleGPUModelBuilder(model_class_configurator=LTXModelConfigurator, model_path=settings["path"],
                                model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)
transformer = X0Model(builder.build(device=torch.device("cpu"), dtype=torch.float32).eval())



def guider(params: dict) -> MultiModalGuiderParams:
    return MultiModalGuiderParams(cfg_scale=params["cfg"], stg_scale=params["stg"], stg_blocks=params["stg_blocks"],
                                  rescale_scale=params["rescale"], modality_scale=params["modality"])


out = {}
for name, case in settings["cases"].items():
    shape = VideoPixelShape(batch=1, frames=case["frames"], height=case["height"], width=case["width"], fps=case["fps"])
    video_tools = VideoLatentTools(VideoLatentPatchifier(patch_size=1), VideoLatentShape.from_pixel_shape(shape),
                                   case["fps"])
    audio_tools = AudioLatentTools(AudioPatchifier(patch_size=1), AudioLatentShape.from_video_pixel_shape(shape))
    items = [VideoConditionByLatentIndex(latent=t[f"{name}.image{i}"], strength=strength, latent_idx=0) if frame == 0
             else VideoConditionByKeyframeIndex(keyframes=t[f"{name}.image{i}"], frame_idx=frame, strength=strength)
             for i, (frame, strength) in enumerate(case["images"])]
    initial = (t.get(f"{name}.initial_video"), t.get(f"{name}.initial_audio"))
    cpu, f32 = torch.device("cpu"), torch.float32
    video = create_noised_state(video_tools, items, TensorNoiser(t[f"{name}.noise_video"]), f32, cpu,
                                case["noise_scale"], initial[0])
    audio = create_noised_state(audio_tools, [], TensorNoiser(t[f"{name}.noise_audio"]), f32, cpu,
                                case["noise_scale"], initial[1])
    sigmas = t[f"{name}.sigmas"]
    vctx, actx = t["positive_video"], t["positive_audio"]
    if case["guidance"] is None:
        denoiser = SimpleDenoiser(vctx, actx)
    else:
        video_guidance, audio_guidance = case["guidance"]
        denoiser = FactoryGuidedDenoiser(
            vctx, actx, create_multimodal_guider_factory(guider(video_guidance), t["negative_video"]),
            create_multimodal_guider_factory(guider(audio_guidance), t["negative_audio"]))
    if case["ancestral_seed"] is None:
        video, audio = euler_denoising_loop(sigmas, video, audio, EulerDiffusionStep(), transformer, denoiser)
    else:
        video, audio = euler_ancestral_denoising_loop(sigmas, video, audio, EulerAncestralDiffusionStep(eta=case["eta"]),
                                                      transformer, denoiser, noise_seed=case["ancestral_seed"],
                                                      model_dtype=f32)
    out[f"{name}.video"] = video_tools.unpatchify(video_tools.clear_conditioning(video)).latent
    out[f"{name}.audio"] = audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent
outputs(out)
