"""The reference side of tests/parity/test_video_to_audio_parity.py (1.2.0's `RetakePipeline` with
`regenerate_video=False` on a file without sound):

* reading: per file, `get_videostream_metadata`, then `decode_video_from_file` (start 0, the clip's duration) and
  `video_preprocess` at the asked size: the encoder's input (1, 3, F, H, W);
* denoising: per case, the tiny transformer file built by 1.2.0's builder; the video state from
  `ModalitySpec(frozen=True, initial_latent=...)` and the audio from noise (`_build_state`, the test's noise tensors
  in place of GaussianNoiser's draws), the schedule as the pipeline picks it (DISTILLED_SIGMAS or LTX2Scheduler),
  `GuidedDenoiser` with a MultiModalGuider per modality (negative contexts) or `SimpleDenoiser`, then
  `euler_denoising_loop` with `EulerDiffusionStep`, as `DiffusionStage.__call__` runs them."""

import torch
from exchange import TensorNoiser, guider, inputs, outputs
from ltx_core.components.diffusion_steps import EulerDiffusionStep
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.transformer import LTXModelConfigurator, X0Model
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
from ltx_core.tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape, VideoLatentShape, VideoPixelShape
from ltx_pipelines.utils.blocks import _build_state
from ltx_pipelines.utils.constants import DISTILLED_SIGMAS
from ltx_pipelines.utils.denoisers import GuidedDenoiser, SimpleDenoiser
from ltx_pipelines.utils.media_io import decode_video_from_file, get_videostream_metadata, video_preprocess
from ltx_pipelines.utils.samplers import euler_denoising_loop
from ltx_pipelines.utils.types import ModalitySpec

t, settings = inputs()
cpu, f32 = torch.device("cpu"), torch.float32
out = {}

for name, read in settings.get("reads", {}).items():
    shape = get_videostream_metadata(read["path"])
    out[f"{name}.metadata"] = torch.tensor([shape.width, shape.height, shape.frames, shape.fps], dtype=torch.float64)
    frames = decode_video_from_file(path=read["path"], device=cpu, start_time=0.0,
                                    max_duration=shape.frames / shape.fps)
    out[f"{name}.pixels"] = video_preprocess(frames, read["height"] or shape.height, read["width"] or shape.width,
                                             f32, cpu)




models = {}
for name, case in settings.get("cases", {}).items():
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
    spec = ModalitySpec(context=vctx, frozen=True, noise_scale=case["video_noise_scale"],
                        initial_latent=t[f"{name}.video_latent"])
    video = _build_state(spec, video_tools, TensorNoiser(t[f"{name}.noise_video"]), f32, cpu)
    audio = _build_state(ModalitySpec(context=actx), audio_tools, TensorNoiser(t[f"{name}.noise_audio"]), f32, cpu)
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
    out[f"{name}.sigmas"] = sigmas.clone()
    out[f"{name}.video"] = video_tools.unpatchify(video_tools.clear_conditioning(video)).latent
    out[f"{name}.audio"] = audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent
outputs(out)
