"""The reference side of tests/parity/test_ancestral_parity.py: ltx-pipelines 1.2.0's ancestral Euler loop (the 2.5
distilled stage 1) over a toy denoiser x0 = tanh(latent·a + b), video then audio, from the test's initial states."""

import torch
from exchange import inputs, outputs
from ltx_core.components.diffusion_steps import EulerAncestralDiffusionStep
from ltx_core.types import LatentState
from ltx_pipelines.utils.samplers import euler_ancestral_denoising_loop
from ltx_pipelines.utils.types import DenoisedLatentResult

t, settings = inputs()


def state(name: str) -> LatentState:
    latent = t[f"{name}_latent"]
    return LatentState(latent=latent, denoise_mask=t[f"{name}_mask"], positions=torch.zeros(1, 1),
                       clean_latent=t[f"{name}_clean"])


def denoiser(transformer, video, audio, sigmas, step_index):
    return tuple(DenoisedLatentResult(denoised=torch.tanh(s.latent * t[f"{n}_a"] + t[f"{n}_b"]))
                 for n, s in (("video", video), ("audio", audio)))


video, audio = euler_ancestral_denoising_loop(
    t["sigmas"], state("video"), state("audio"), EulerAncestralDiffusionStep(eta=settings["eta"]), transformer=None,
    denoiser=denoiser, noise_seed=settings["seed"], model_dtype=torch.float32)
outputs({"video": video.latent, "audio": audio.latent})
