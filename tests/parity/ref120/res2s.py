"""The reference side of tests/parity/test_res2s_parity.py: ltx-pipelines 1.2.0's res_2s loop (the HQ pipeline's)
over a toy denoiser x0 = tanh(latent·a + b)·(1 + σ/10), video then audio (or audio alone), from the test's states,
with the loop's own fixed SDE seeds, fp32 (`model_dtype` float32)."""

import torch
from exchange import inputs, outputs
from ltx_core.components.diffusion_steps import Res2sDiffusionStep
from ltx_core.types import LatentState
from ltx_pipelines.utils.res2s import get_res2s_coefficients
from ltx_pipelines.utils.samplers import res2s_audio_video_denoising_loop
from ltx_pipelines.utils.types import DenoisedLatentResult

t, settings = inputs()


def state(name: str) -> LatentState | None:
    if f"{name}_latent" not in t:
        return None
    return LatentState(latent=t[f"{name}_latent"], denoise_mask=t[f"{name}_mask"], positions=torch.zeros(1, 1),
                       clean_latent=t[f"{name}_clean"])


def denoiser(transformer, video_state, audio_state, sigmas, step_index):
    sigma = sigmas[step_index].float()
    return tuple(None if s is None else
                 DenoisedLatentResult(denoised=torch.tanh(s.latent * t[f"{n}_a"] + t[f"{n}_b"]) * (1 + sigma / 10))
                 for n, s in (("video", video_state), ("audio", audio_state)))


video, audio = res2s_audio_video_denoising_loop(
    t["sigmas"], state("video"), state("audio"), Res2sDiffusionStep(), transformer=None, denoiser=denoiser,
    model_dtype=torch.float32)
coefficients = torch.tensor([get_res2s_coefficients(h, {}) for h in settings["hs"]], dtype=torch.float64)
outputs({"audio": audio.latent, "coefficients": coefficients} | ({} if video is None else {"video": video.latent}))
