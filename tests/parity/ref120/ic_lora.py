"""The reference side of tests/parity/test_control_parity.py (1.2.0's `ICLoraPipeline` stage 1): per case, the tiny
transformer file built by 1.2.0's builder; the video state from `ModalitySpec(conditionings=[...])` with one
`VideoConditionByReferenceLatent` per control (the test's encoded latents, factors and strengths; wrapped in
`ConditioningItemAttentionStrengthWrapper` where it has attention weights, as `append_ic_lora_reference_video_
conditionings` wraps it) and the audio from
noise (`_build_state`, the test's noise tensors in place of GaussianNoiser's draws), the LTX2 schedule, `GuidedDenoiser`
with a MultiModalGuider per modality (negative contexts), then `euler_denoising_loop` with `EulerDiffusionStep`, as
`DiffusionStage.__call__` runs them; the guiding tokens cleared before unpatchifying."""

import torch
from exchange import TensorNoiser, guider, inputs, outputs
from ltx_core.components.diffusion_steps import EulerDiffusionStep
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.conditioning import ConditioningItemAttentionStrengthWrapper, VideoConditionByReferenceLatent
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import LTXModelConfigurator, X0Model
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
from ltx_core.tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.iclora_utils import downsample_mask_video_to_latent
from ltx_pipelines.utils.blocks import _build_state
from ltx_pipelines.utils.denoisers import GuidedDenoiser
from ltx_pipelines.utils.samplers import euler_denoising_loop
from ltx_pipelines.utils.types import ModalitySpec

t, settings = inputs()
cpu, f32 = torch.device("cpu"), torch.float32
out = {}



builder = SingleGPUModelBuilder(model_class_configurator=LTXModelConfigurator, model_path=settings["path"],
                                model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)
transformer = X0Model(builder.build(device=cpu, dtype=f32).eval())
for name, case in settings["cases"].items():
    shape = VideoPixelShape(batch=1, frames=case["frames"], height=case["height"], width=case["width"], fps=case["fps"])
    video_tools = VideoLatentTools(VideoLatentPatchifier(patch_size=1), VideoLatentShape.from_pixel_shape(shape),
                                   case["fps"])
    audio_tools = AudioLatentTools(AudioPatchifier(patch_size=1), AudioLatentShape.from_video_pixel_shape(shape))
    vctx, actx = t["positive_video"], t["positive_audio"]
    items = []
    for i, (factor, strength, attention, masked) in enumerate(case["controls"]):
        latent = t[f"{name}.control{i}"]
        item = VideoConditionByReferenceLatent(latent=latent, downscale_factor=factor, strength=strength)
        if masked:  # as append_ic_lora_reference_video_conditionings builds the wrapper's mask
            weights = downsample_mask_video_to_latent(t[f"{name}.mask{i}"], VideoLatentShape.from_torch_shape(
                latent.shape)) * attention
        else:
            weights = attention if attention < 1.0 else None
        items.append(item if weights is None else ConditioningItemAttentionStrengthWrapper(item, weights))
    video = _build_state(ModalitySpec(context=vctx, conditionings=items), video_tools,
                         TensorNoiser(t[f"{name}.noise_video"]), f32, cpu)
    out[f"{name}.positions"] = video.positions.clone()
    out[f"{name}.mask"] = video.denoise_mask.float().clone()
    out[f"{name}.clean"] = video.clean_latent.clone()
    if video.attention_mask is not None:
        out[f"{name}.attention"] = video.attention_mask.float().clone()
    audio = _build_state(ModalitySpec(context=actx), audio_tools, TensorNoiser(t[f"{name}.noise_audio"]), f32, cpu)
    video_params, audio_params = case["guidance"]
    denoiser = GuidedDenoiser(v_context=vctx, a_context=actx,
                              video_guider=guider(video_params, t["negative_video"]),
                              audio_guider=guider(audio_params, t["negative_audio"]))
    sigmas = LTX2Scheduler().execute(steps=case["steps"]).to(dtype=f32, device=cpu)
    video, audio = euler_denoising_loop(sigmas=sigmas, video_state=video, audio_state=audio,
                                        stepper=EulerDiffusionStep(), transformer=transformer, denoiser=denoiser)
    out[f"{name}.video"] = video_tools.unpatchify(video_tools.clear_conditioning(video)).latent
    out[f"{name}.audio"] = audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent
outputs(out)
