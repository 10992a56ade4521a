"""The res_2s sampler (`sampling.res2s.Res2sStep`, the HQ two-stage pipeline's) against ltx-pipelines 1.2.0's
`res2s_audio_video_denoising_loop`, over a toy denoiser so the test isolates the sampler: the coefficients, the
substep and step SDE noise (the reference's fixed seeds, two generators), the bong fixed point, the re-blend of
conditioned tokens and the final prediction at 0.0011. fp32 states, float64 work; tolerance 1e-6."""

import pytest
import torch

from ltx2_core.sampling import StepSetup, StreamState, denoise, ltx2_sigmas
from ltx2_core.sampling.res2s import (
    RES2S_STEP_SEED,
    RES2S_SUBSTEP_SEED,
    Res2sStep,
    res2s_coefficients,
    res2s_plan,
)
from support.reference120 import run_reference

TOKENS = {"video": 12, "audio": 5}
CHANNELS = 128
# a 3-step LTX2 schedule at 12 tokens (shift 0.59: bong on its later steps) and a hand-made one with both kinds
SCHEDULES = {"ltx2-12-tokens": ltx2_sigmas(3, tokens=12), "mixed": torch.tensor([1.0, 0.95, 0.9, 0.5, 0.0]),
             "no-zero": torch.tensor([1.0, 0.6, 0.2])}
HS = [1e-12, 0.01, 0.3, 0.7, 4.5]


class ToyRunner:
    """One conditional pass whose x0 is tanh(latent·a + b)·(1 + σ/10) per stream (the reference script's)."""

    passes = ("cond",)

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        self.weights = weights

    def __call__(self, video, audio):
        w = self.weights
        return tuple(None if s is None else torch.tanh(s.latent * w[f"{n}_a"] + w[f"{n}_b"]) * (1 + s.sigma[0] / 10)
                     for n, s in (("video", video), ("audio", audio)))


def _case(schedule: str, masked: bool, audio_only: bool = False) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    tensors = {"sigmas": SCHEDULES[schedule].float()}
    for name, tokens in TOKENS.items():
        tensors[f"{name}_latent"] = torch.randn(1, tokens, CHANNELS, generator=g)
        tensors[f"{name}_clean"] = torch.randn(1, tokens, CHANNELS, generator=g) if masked else \
            torch.zeros(1, tokens, CHANNELS)
        mask = torch.ones(1, tokens, 1)
        if masked and name == "video":
            mask[:, :4] = 0.0  # the first latent frame is an image condition
            mask[:, 4:6] = 0.4  # tokens held at strength 0.6: the blend must be applied once per prediction
            tensors[f"{name}_latent"][:, :4] = tensors[f"{name}_clean"][:, :4]
        tensors[f"{name}_mask"] = mask
        tensors[f"{name}_a"] = torch.rand(CHANNELS, generator=g) + 0.5
        tensors[f"{name}_b"] = torch.randn(CHANNELS, generator=g) * 0.1
    if audio_only:
        tensors = {k: v for k, v in tensors.items() if not k.startswith("video")}
    return tensors


def _ours(t: dict[str, torch.Tensor]) -> tuple[torch.Tensor | None, torch.Tensor]:
    states = [StreamState(t[f"{n}_latent"], t[f"{n}_clean"], t[f"{n}_mask"]) if f"{n}_latent" in t else None
              for n in TOKENS]
    plan = res2s_plan(t["sigmas"])
    step = Res2sStep(plan, torch.Generator().manual_seed(RES2S_STEP_SEED),
                     torch.Generator().manual_seed(RES2S_SUBSTEP_SEED))
    video, audio = denoise(StepSetup(ToyRunner(t), None, None), *states, plan.sigmas, step=step)
    return None if video is None else video.latent, audio.latent


@pytest.mark.parametrize("schedule, masked, audio_only", [
    ("ltx2-12-tokens", False, False), ("ltx2-12-tokens", True, False), ("mixed", True, False),
    ("no-zero", False, False), ("mixed", False, True)],
    ids=["ltx2-fresh", "ltx2-image-conditioned", "mixed-conditioned", "no-final-zero", "audio-only"])
def test_res2s_loop_matches_the_reference(tmp_path, schedule, masked, audio_only):
    t = _case(schedule, masked, audio_only)
    want = run_reference("res2s.py", t, {"hs": HS}, tmp_path=tmp_path)
    video, audio = _ours(t)
    torch.testing.assert_close(audio, want["audio"], rtol=0, atol=1e-6)
    if audio_only:
        assert video is None and "video" not in want
    else:
        torch.testing.assert_close(video, want["video"], rtol=0, atol=1e-6)
    if masked:  # the conditioned tokens are copies of the clean latent on both sides
        torch.testing.assert_close(video[:, :4], t["video_clean"][:, :4], rtol=0, atol=1e-6)
    ours = torch.tensor([res2s_coefficients(h) for h in HS], dtype=torch.float64)
    torch.testing.assert_close(ours, want["coefficients"], rtol=1e-15, atol=1e-15)


def test_the_plans_cover_bong_and_plain_intervals():
    """The cases above exercise both kinds of interval (h < 0.5 and σ > 0.03 moves the anchor), and a schedule
    falling to 0 gains the final prediction at 0.0011."""
    bongs = {name: res2s_plan(sigmas).bong for name, sigmas in SCHEDULES.items()}
    assert any(bongs["mixed"]) and not all(bongs["mixed"])
    assert any(bongs["ltx2-12-tokens"])
    plan = res2s_plan(SCHEDULES["mixed"])
    assert plan.sigmas.tolist()[-2:] == pytest.approx([0.0011, 0.0]) and plan.rows.shape == (4, 14)
    assert res2s_plan(SCHEDULES["no-zero"]).sigmas.shape == (3,)


def test_the_sde_noise_and_the_bong_step_matter():
    """The comparison above is not blind to the noise: other seeds, or no bong, give another result."""
    t = _case("mixed", masked=False)
    video, _ = _ours(t)
    states = [StreamState(t[f"{n}_latent"], t[f"{n}_clean"], t[f"{n}_mask"]) for n in TOKENS]
    plan = res2s_plan(t["sigmas"])
    for changed in (plan, plan._replace(bong=(False,) * len(plan.bong))):
        seeds = (1, 2) if changed is plan else (RES2S_STEP_SEED, RES2S_SUBSTEP_SEED)
        step = Res2sStep(changed, *(torch.Generator().manual_seed(s) for s in seeds))
        other, _ = denoise(StepSetup(ToyRunner(t), None, None), *states, plan.sigmas, step=step)
        assert (other.latent - video).abs().max() > 1e-4
