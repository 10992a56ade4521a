"""Step caching (ltx2_core.sampling.cache): ComfyUI 0.26 EasyCache's window, subsampling and decisions on our token
layout, against an independent EasyCache loop written in ComfyUI's (B, C, F, H, W) layout; on the tiny demo model:
forwards saved, no skip at threshold 0, the schedule-decided replay, and the census of host reads (one per decided
step with the threshold, none with the schedule)."""

from __future__ import annotations

import math

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, patchify_video, video_positions
from ltx2_core.sampling import GuidanceParams, denoise, guided_setup, ltx2_sigmas, noised_state, sigma_table
from ltx2_core.sampling.cache import (
    BEFORE,
    INSIDE,
    PAST,
    CachedPasses,
    CacheSettings,
    decider_pass,
    percent_to_sigma,
    step_windows,
)
from ltx2_core.types import StreamInput, TextEmbeddings
from support.census import OpCensus

F, H, W, AUDIO_TOKENS = 2, 9, 10, 9


def test_percent_to_sigma_is_ltx2s_model_sampling():
    """ComfyUI's ModelSamplingFlux at LTX-2's shift 2.37: e^s / (e^s + 1/t − 1), t = 1 − percent; 1 and 0 at the
    ends."""
    for percent in (0.15, 0.5, 0.95):
        t = 1 - percent
        assert percent_to_sigma(percent) == pytest.approx(math.exp(2.37) / (math.exp(2.37) + 1 / t - 1), rel=1e-12)
    assert percent_to_sigma(0.15) == pytest.approx(0.98377, abs=1e-5)
    assert percent_to_sigma(0.95) == pytest.approx(0.36022, abs=1e-5)
    assert (percent_to_sigma(0.0), percent_to_sigma(-1.0), percent_to_sigma(1.0)) == (1.0, 1.0, 0.0)


def test_the_window_compares_as_comfyui_does():
    sigmas = sigma_table((1.0, 0.99, 0.9, 0.5, 0.36, 0.2, 0.0))
    assert step_windows(sigmas, 0.95, 0.36) == (BEFORE, BEFORE, INSIDE, INSIDE, PAST, PAST)
    # the float bound is compared in the tensor's dtype (fp32), as ComfyUI's `timestep[0] > end_t` does
    assert step_windows(sigma_table((0.7, 0.0)), 1.0, float(torch.tensor(0.7))) == (PAST,)


def test_settings_refuse_bad_values_naming_the_range():
    with pytest.raises(ValueError, match="threshold.*≥ 0"):
        CacheSettings(reuse_threshold=-0.1)
    with pytest.raises(ValueError, match=r"start .*\[0, 1\]"):
        CacheSettings(start_percent=1.5)
    with pytest.raises(ValueError, match="subsample"):
        CacheSettings(subsample=0)


def test_the_decider_is_comfyuis_first_uuid():
    """CFGGuider's conds are batched negative first: its unconditional pass decides; without CFG the conditional."""
    assert decider_pass(("cond", "uncond")) == 1
    assert decider_pass(("cond", "uncond", "perturbed", "isolated")) == 1
    assert decider_pass(("cond", "perturbed")) == 0


class _Field:
    """A fake transformer: velocity = tanh(x·M_p)·g_p(σ) per pass p, along the channels, in either layout;
    g_0 = 1 + σ, g_1 = 1 + 6σ²: the passes change at different rates, so which one decides shows in the decisions."""

    def __init__(self, passes: int, channels: int = 16) -> None:
        g = torch.Generator().manual_seed(3)
        self.mix = torch.randn(passes, channels, channels, generator=g, dtype=torch.float64) / channels ** 0.5

    def gains(self, sigma: float) -> torch.Tensor:
        return torch.tensor([1 + sigma, 1 + 6 * sigma ** 2], dtype=torch.float64)

    def tokens(self, latent: torch.Tensor, sigma: float) -> torch.Tensor:  # (P, T, C)
        return torch.tanh(latent @ self.mix) * self.gains(sigma)[:, None, None]

    def comfy(self, latent: torch.Tensor, sigma: float) -> torch.Tensor:  # (P, C, F, H, W)
        moved = latent.movedim(1, -1)
        mixed = torch.tanh(torch.einsum("pfhwc,pcd->pfhwd", moved, self.mix))
        return (mixed * self.gains(sigma)[:, None, None, None, None]).movedim(-1, 1)


def _comfy_easycache(field, video, audio, sigmas, threshold, start_t, end_t, order):
    """EasyCache's loop as ComfyUI 0.26 runs it on LTX-2's [video, audio] diffusion-model input, one batched
    forward per step with the passes in `order` (its uuids), written here in ComfyUI's layout: video (1, C, F, H, W),
    audio (1, T, C). Returns (skipped steps, final video)."""
    rate = x_prev = out_prev = norm = None
    cumulative, diffs, skipped = 0.0, None, []
    for index in range(len(sigmas) - 1):
        sigma, nxt = float(sigmas[index]), float(sigmas[index + 1])
        x = video.expand(len(order), -1, -1, -1, -1)[order]
        ax = audio.expand(len(order), -1, -1)
        past, inside = not bool(sigmas[index] > end_t), bool(sigmas[index] <= start_t)
        out = None
        change = None
        if not past and inside:
            if x_prev is not None:
                change = (x[0][..., ::8, ::8] - x_prev).flatten().abs().mean()
            if norm is not None and rate is not None:
                cumulative = cumulative + rate * change / norm
                if bool(cumulative < threshold):
                    skipped.append(index)
                    out, aout = x + diffs[0], ax + diffs[1]
                else:
                    cumulative = 0.0
        if out is None:
            out = field.comfy(x, sigma)[order]
            aout = field.tokens(ax, sigma)
            if not past:
                if inside and norm is not None:
                    output_change = (out[0][..., ::8, ::8] - out_prev).flatten().abs().mean()
                    if change is not None:
                        rate = output_change / change
                if inside:
                    x_prev, out_prev, norm = x[0][..., ::8, ::8], out[0][..., ::8, ::8], out.flatten().abs().mean()
                diffs = (out - x, aout - ax)
        guided = out[order.index(0)] * 3 - out[order.index(1)] * 2  # CFG 3 of (cond, uncond) in pass order
        video = video + (nxt - sigma) * guided.unsqueeze(0)
        audio = audio + (nxt - sigma) * (aout[0] * 3 - aout[1] * 2).unsqueeze(0)
    return skipped, video


class _FieldPasses:
    """The fake transformer as our pass runner: passes (cond, uncond), velocities in token layout."""

    passes = ("cond", "uncond")
    forwards = 1

    def __init__(self, field: _Field, sigmas: torch.Tensor) -> None:
        self.field, self.sigmas, self.calls = field, sigmas, 0

    def velocities(self, video: StreamInput, audio: StreamInput):
        sigma = float(video.sigma[0])
        self.calls += 1
        return self.field.tokens(video.latent, sigma), self.field.tokens(audio.latent, sigma)


@pytest.mark.parametrize("threshold", [0.3, 0.5, 1.0])
def test_decisions_equal_an_easycache_loop_in_comfyuis_layout(threshold):
    """A grid of 17 × 10 latent pixels, so ComfyUI's [..., ::8, ::8] picks rows 0, 8, 16 and columns 0, 8."""
    frames, rows, cols, channels = 3, 17, 10, 16
    g = torch.Generator().manual_seed(5)
    video = torch.randn(1, channels, frames, rows, cols, generator=g, dtype=torch.float64)
    audio = torch.randn(1, 7, channels, generator=g, dtype=torch.float64)
    sigmas = ltx2_sigmas(16).double()
    field = _Field(2, channels)
    start_t, end_t = percent_to_sigma(0.15), percent_to_sigma(0.95)
    expected, final = _comfy_easycache(field, video, audio, sigmas, threshold, start_t, end_t, order=[1, 0])
    assert 0 < len(expected) < 10  # the threshold skips some steps and runs others: the comparison can fail

    inner = _FieldPasses(field, sigmas)
    cache = CachedPasses(inner, CacheSettings(reuse_threshold=threshold), sigmas, (frames, rows, cols))
    tokens, audio_tokens = patchify_video(video), audio
    ones = torch.ones(2, 1, dtype=torch.float64)
    for index in range(len(sigmas) - 1):
        sigma, nxt = sigmas[index], sigmas[index + 1]
        v_in = StreamInput(tokens.expand(2, -1, -1), sigma.expand(2), ones * sigma)
        a_in = StreamInput(audio_tokens.expand(2, -1, -1), sigma.expand(2), ones * sigma)
        v_x0, a_x0 = cache(v_in, a_in)
        v_vel, a_vel = (v_in.latent - v_x0) / sigma, (a_in.latent - a_x0) / sigma  # back from x0 for the fake loop
        tokens = tokens + (nxt - sigma) * (v_vel[0] * 3 - v_vel[1] * 2).unsqueeze(0)
        audio_tokens = audio_tokens + (nxt - sigma) * (a_vel[0] * 3 - a_vel[1] * 2).unsqueeze(0)
    record = cache.record()
    assert record.skipped == tuple(expected)
    assert inner.calls == len(sigmas) - 1 - len(expected) and record.forwards_saved == len(expected)
    # our x0 is computed in fp32 (`to_x0`), the fake loop's velocity recovered from it: 2.6e-6 measured
    torch.testing.assert_close(tokens, patchify_video(final), rtol=1e-5, atol=1e-5)
    # the subsample is ComfyUI's, element for element (a pure copy: exact)
    picked = cache._subsample(patchify_video(video).expand(2, -1, -1))
    assert torch.equal(picked, video[0][..., ::8, ::8].permute(1, 2, 3, 0))


@pytest.fixture(scope="module")
def model():
    return demo_transformer(TransformerConfig.tiny("2.3"), seed=4)


def _run(model, settings: CacheSettings | None, sigmas: torch.Tensor, census: bool = False):
    g = torch.Generator().manual_seed(0)
    cfg = model.config
    texts = [TextEmbeddings(torch.randn(1, 5, cfg.video.context_dim, generator=g),
                            torch.randn(1, 5, cfg.audio.context_dim, generator=g)) for _ in range(2)]
    guidance = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(1,), modality=2.0)
    setup = guided_setup(model, texts[0], texts[1], video_positions(F, H, W, 24.0), audio_positions(AUDIO_TOKENS),
                         guidance, guidance)
    g = torch.Generator().manual_seed(1)
    video = noised_state(torch.zeros(1, F * H * W, 128), torch.randn(1, F * H * W, 128, generator=g))
    audio = noised_state(torch.zeros(1, AUDIO_TOKENS, 128), torch.randn(1, AUDIO_TOKENS, 128, generator=g))
    cache = None if settings is None else CachedPasses(setup.runner, settings, sigmas, (F, H, W))
    forwards = []
    hook = model.register_forward_hook(lambda module, args, out: forwards.append(args[0].latent.shape[0]))
    try:
        with OpCensus() as counted:
            result = denoise(setup if cache is None else setup._replace(runner=cache), video, audio, sigmas)
    finally:
        hook.remove()
    return result, cache, forwards, counted


SIGMAS = ltx2_sigmas(20)


def test_the_tiny_model_skips_steps_and_saves_their_forwards(model):
    (video, audio), _, _, _ = _run(model, None, SIGMAS)
    (cached_video, cached_audio), cache, forwards, census = _run(model, CacheSettings(reuse_threshold=1.0), SIGMAS)
    record = cache.record()
    assert 0 < len(record.skipped) < 10
    assert forwards == [4] * (20 - len(record.skipped))  # one forward of the 4 passes per step run
    assert record.forwards_saved == len(record.skipped) and record.passes_saved == 4 * len(record.skipped)
    inside = sum(w == INSIDE for w in cache.windows)
    # host reads: one per decided step (every step of the window but its first two), none elsewhere
    assert census.syncs() == {"aten._local_scalar_dense": inside - 2} and record.host_reads == inside - 2
    assert census.transfers() == 0
    # the cached run stays near the full one (the tiny random model moves a lot: 9 % measured at threshold 1)
    for full, cached in ((video.latent, cached_video.latent), (audio.latent, cached_audio.latent)):
        error = ((cached - full).norm() / full.norm()).item()
        assert 1e-4 < error < 0.3, error


def test_threshold_zero_never_skips_and_changes_nothing(model):
    (video, audio), _, _, _ = _run(model, None, SIGMAS)
    (cached_video, cached_audio), cache, forwards, _ = _run(model, CacheSettings(reuse_threshold=0.0), SIGMAS)
    assert cache.record().skipped == () and len(forwards) == 20
    torch.testing.assert_close(cached_video.latent, video.latent, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cached_audio.latent, audio.latent, rtol=1e-6, atol=1e-6)


def test_the_schedule_decided_replay_reads_nothing_and_gives_the_same_run(model):
    (video, audio), cache, _, _ = _run(model, CacheSettings(reuse_threshold=1.0), SIGMAS)
    skipped = cache.record().skipped
    replay_settings = CacheSettings(skip_steps=skipped)
    (replay_video, replay_audio), replay, forwards, census = _run(model, replay_settings, SIGMAS)
    assert replay.record().skipped == skipped and len(forwards) == 20 - len(skipped)
    assert census.syncs() == {} and census.transfers() == 0  # 0 host reads per step
    assert replay.record().host_reads == 0
    torch.testing.assert_close(replay_video.latent, video.latent, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(replay_audio.latent, audio.latent, rtol=1e-6, atol=1e-6)


def test_a_runner_without_velocities_is_refused():
    class Parallel:
        passes = ("cond",)

    with pytest.raises(ValueError, match="CFG-parallel"):
        CachedPasses(Parallel(), CacheSettings(), SIGMAS, (F, H, W))
