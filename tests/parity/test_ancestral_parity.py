"""The ancestral Euler loop of LTX-2.5's distilled stage 1 (`sampling.denoise.AncestralStep`) against
ltx-pipelines 1.2.0's `euler_ancestral_denoising_loop`, over a toy denoiser so the test isolates the sampler: the
step's algebra, the re-blend of conditioned tokens, the noise drawn per step (video, then audio, one generator) and
the last step landing on x0. fp32; tolerance 1e-5 (eight steps of elementwise fp32 algebra)."""

import pytest
import torch

from ltx2_core.sampling import DISTILLED_SIGMAS, StepSetup, StreamState, denoise
from ltx2_core.sampling.denoise import AncestralStep
from support.reference120 import run_reference

TOKENS = {"video": 12, "audio": 5}
CHANNELS = 128


class ToyRunner:
    """One conditional pass whose x0 is tanh(latent·a + b) per stream (the reference script's denoiser)."""

    passes = ("cond",)

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        self.weights = weights

    def __call__(self, video, audio):
        w = self.weights
        return (torch.tanh(video.latent * w["video_a"] + w["video_b"]),
                torch.tanh(audio.latent * w["audio_a"] + w["audio_b"]))


def _case(masked: bool, partial: bool = False) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    tensors = {"sigmas": torch.tensor(DISTILLED_SIGMAS, dtype=torch.float32)}
    for name, tokens in TOKENS.items():
        tensors[f"{name}_latent"] = torch.randn(1, tokens, CHANNELS, generator=g)
        tensors[f"{name}_clean"] = torch.randn(1, tokens, CHANNELS, generator=g) if masked else \
            torch.zeros(1, tokens, CHANNELS)
        mask = torch.ones(1, tokens, 1)
        if masked and name == "video":
            mask[:, :4] = 0.0  # the first latent frame is an image condition
            tensors[f"{name}_latent"][:, :4] = tensors[f"{name}_clean"][:, :4]
            if partial:  # the next frame held in part (an image of strength 0.8): kept once on the last step
                mask[:, 4:8] = 0.2
        tensors[f"{name}_mask"] = mask
        tensors[f"{name}_a"] = torch.rand(CHANNELS, generator=g) + 0.5
        tensors[f"{name}_b"] = torch.randn(CHANNELS, generator=g) * 0.1
    return tensors


def _ours(t: dict[str, torch.Tensor], seed: int, eta: float) -> tuple[torch.Tensor, torch.Tensor]:
    states = [StreamState(t[f"{n}_latent"], t[f"{n}_clean"], t[f"{n}_mask"]) for n in TOKENS]
    setup = StepSetup(ToyRunner(t), None, None)
    step = AncestralStep(torch.Generator().manual_seed(seed), eta)
    video, audio = denoise(setup, *states, t["sigmas"], step=step)
    return video.latent, audio.latent


@pytest.mark.parametrize("eta", [1.0, 0.5], ids=["eta1", "eta0.5"])  # 0.5: DFR's temporal rounds
@pytest.mark.parametrize("masked", [False, True], ids=["fresh", "image-conditioned"])
def test_ancestral_loop_matches_the_reference(tmp_path, masked, eta):
    t = _case(masked)
    settings = {"seed": 10042, "eta": eta}
    want = run_reference("ancestral.py", t, settings, tmp_path=tmp_path)
    video, audio = _ours(t, settings["seed"], settings["eta"])
    torch.testing.assert_close(video, want["video"], rtol=0, atol=1e-5)
    torch.testing.assert_close(audio, want["audio"], rtol=0, atol=1e-5)
    if masked:  # the conditioned tokens are copies of the clean latent on both sides
        torch.testing.assert_close(video[:, :4], t["video_clean"][:, :4], rtol=0, atol=1e-6)


def test_eta_zero_is_the_euler_loop():
    """η = 0 draws noise with weight 0: the deterministic Euler loop's result."""
    t = _case(masked=True)
    from ltx2_core.sampling import guided_step
    states = [StreamState(t[f"{n}_latent"], t[f"{n}_clean"], t[f"{n}_mask"]) for n in TOKENS]
    euler = denoise(StepSetup(ToyRunner(t), None, None), *states, t["sigmas"], step=guided_step)
    ancestral = _ours(t, seed=1, eta=0.0)
    for got, want in zip(ancestral, (euler[0].latent, euler[1].latent)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_seed_changes_the_result_and_reproduces():
    t = _case(masked=False)
    first, again, other = _ours(t, 7, 1.0), _ours(t, 7, 1.0), _ours(t, 8, 1.0)
    torch.testing.assert_close(first[0], again[0], rtol=0, atol=0)  # same seed, same draws: a pure repeat
    assert (first[0] - other[0]).abs().max() > 1e-2


@pytest.mark.parametrize("eta", [1.0, 0.5], ids=["eta1", "eta0.5"])
def test_partly_held_tokens_match_the_reference(tmp_path, eta):
    """Tokens held in part (0 < mask < 1): the last step returns the kept prediction as the reference does, not kept a
    second time."""
    t = _case(masked=True, partial=True)
    want = run_reference("ancestral.py", t, {"seed": 10042, "eta": eta}, tmp_path=tmp_path)
    video, audio = _ours(t, 10042, eta)
    torch.testing.assert_close(video, want["video"], rtol=0, atol=1e-5)
    torch.testing.assert_close(audio, want["audio"], rtol=0, atol=1e-5)
