"""The reference side of tests/parity/test_keyframe_slots_parity.py: ltx-core 1.2.0's generated keyframe slots
(`VideoGeneratedKeyframeSlots`) after an image keyframe or carried keyframes on the latent tools' initial state, noised by the test's noise
(GaussianNoiser's lerps); then, per case, the 1.2.0 pipelines' loop over the tiny 2.5 transformer with the keyframe
embedding (`euler_denoising_loop`, or `euler_ancestral_denoising_loop` with the case's eta and seed, as
DiffusionStage runs them) and `clear_conditioning`, which returns the slots' denoised content."""

import torch
from exchange import TensorNoiser, inputs, outputs
from ltx_core.components.diffusion_steps import EulerAncestralDiffusionStep, EulerDiffusionStep
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.conditioning import VideoConditionByKeyframeIndex, VideoGeneratedKeyframeSlots
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import LTXModelConfigurator, X0Model
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
from ltx_core.tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.utils.denoisers import SimpleDenoiser
from ltx_pipelines.utils.helpers import create_noised_state
from ltx_pipelines.utils.samplers import euler_ancestral_denoising_loop, euler_denoising_loop

t, settings = inputs()
cpu, f32 = torch.device("cpu"), torch.float32
builder = SingleGPUModelBuilder(model_class_configurator=LTXModelConfigurator, model_path=settings["path"],
                                model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)
transformer = X0Model(builder.build(device=cpu, dtype=f32).eval())
shape = VideoPixelShape(batch=1, frames=settings["frames"], height=settings["height"], width=settings["width"],
                        fps=settings["fps"])
video_tools = VideoLatentTools(VideoLatentPatchifier(patch_size=1), VideoLatentShape.from_pixel_shape(shape),
                               settings["fps"])
audio_tools = AudioLatentTools(AudioPatchifier(patch_size=1), AudioLatentShape.from_video_pixel_shape(shape))
out = {}
for name, case in settings["cases"].items():
    items = [VideoConditionByKeyframeIndex(keyframes=t["image"], frame_idx=case["image_frame"],
                                           strength=case["image_strength"])] if "image_frame" in case else []
    # a temporal round's carried keyframes (DFRPipeline's _keyframe_conditionings_from_latents)
    items += [VideoConditionByKeyframeIndex(keyframes=t[f"{name}.anchors"][:, :, i:i + 1], frame_idx=frame,
                                            strength=case["anchor_strength"])
              for i, frame in enumerate(case.get("anchors", []))]
    items.append(VideoGeneratedKeyframeSlots(case["slots"], initial_keyframes=t.get(f"{name}.slot_initial")))
    noise = TensorNoiser(t[f"{name}.noise_video"])
    video = create_noised_state(video_tools, items, noise, f32, cpu, case["noise_scale"], t["initial_video"])
    for field in ("latent", "clean_latent", "denoise_mask", "positions", "keyframes_mask"):
        out[f"{name}.state.{field}"] = getattr(video, field)
    audio = create_noised_state(audio_tools, [], TensorNoiser(t[f"{name}.noise_audio"]), f32, cpu,
                                case["noise_scale"], t["initial_audio"])
    denoiser = SimpleDenoiser(t["context_video"], t["context_audio"])
    sigmas = t[f"{name}.sigmas"]
    if case["ancestral_seed"] is None:
        video, audio = euler_denoising_loop(sigmas, video, audio, EulerDiffusionStep(), transformer, denoiser)
    else:
        video, audio = euler_ancestral_denoising_loop(sigmas, video, audio, EulerAncestralDiffusionStep(eta=case["eta"]),
                                                      transformer, denoiser, noise_seed=case["ancestral_seed"],
                                                      model_dtype=f32)
    cleared = video_tools.clear_conditioning(video)
    out[f"{name}.video"] = video_tools.unpatchify(cleared).latent
    out[f"{name}.keyframes"] = cleared.generated_keyframes
    out[f"{name}.audio"] = audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent
outputs(out)
