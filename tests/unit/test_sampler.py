"""The denoising loop: no host syncs or host-to-device copies per step, no recompiles on new scales, one batched
forward per step, and the denoise mask keeps conditioned tokens clean."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.sampling import (
    DISTILLED_SIGMAS,
    GuidanceParams,
    denoise,
    guided_setup,
    guided_step,
    ltx2_sigmas,
    noised_state,
    sigma_table,
)
from ltx2_core.sampling.denoise import AncestralStep
from ltx2_core.sampling.steps import StreamState
from ltx2_core.types import TextEmbeddings
from support.census import OpCensus

FRAMES, ROWS, COLS, AUDIO_TOKENS = 2, 2, 3, 9
FULL = (GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(1,), rescale=0.7, modality=3.0),
        GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(1,), rescale=0.7, modality=3.0))


@pytest.fixture(scope="module")
def model():
    return demo_transformer(TransformerConfig.tiny("2.3"), seed=4)


def _texts(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    return [TextEmbeddings(torch.randn(1, 5, cfg.video.context_dim, generator=g),
                           torch.randn(1, 5, cfg.audio.context_dim, generator=g)) for _ in range(2)]


def _plan(model, video_guidance=None, audio_guidance=None, passes_per_forward=None):
    positive, negative = _texts(model)
    return guided_setup(model, positive, negative, video_positions(FRAMES, ROWS, COLS, 24.0),
                        audio_positions(AUDIO_TOKENS), video_guidance, audio_guidance,
                        passes_per_forward=passes_per_forward)


def _states(seed=1, video_mask=None):
    g = torch.Generator().manual_seed(seed)
    noise_video, noise_audio = torch.randn(1, FRAMES * ROWS * COLS, 128, generator=g), torch.randn(
        1, AUDIO_TOKENS, 128, generator=g)
    clean = torch.randn(1, FRAMES * ROWS * COLS, 128, generator=g)
    return (noised_state(clean, noise_video, mask=video_mask),
            noised_state(torch.zeros_like(noise_audio), noise_audio))


@pytest.fixture(scope="module", params=["2.3", "2.5"])
def census_model(request):
    """2.3 (text K/V per forward) and 2.5 (text K/V from the run's cache, per-token cross-attention modulation)."""
    return demo_transformer(TransformerConfig.tiny(request.param), seed=4)


@pytest.mark.parametrize("guidance, sigmas, ancestral", [
    (FULL, ltx2_sigmas(4), False), ((None, None), sigma_table(DISTILLED_SIGMAS), False),
    ((None, None), sigma_table(DISTILLED_SIGMAS), True)], ids=["full-guidance", "distilled", "distilled-ancestral"])
def test_steps_never_sync_or_copy_host_data(census_model, guidance, sigmas, ancestral):
    """Also LTX-2.5's distilled stage 1: ancestral steps draw their noise on the device, from a device generator."""
    model = census_model
    mask = torch.ones(1, FRAMES * ROWS * COLS, 1)
    mask[:, : ROWS * COLS] = 0.0  # a conditioned first frame: per-token timesteps and the clean blend run too
    plan = _plan(model, *guidance)  # set-up: scales, contexts, RoPE, masks go to the device here, once
    video, audio = _states(video_mask=mask)
    step = AncestralStep(torch.Generator().manual_seed(5)) if ancestral else guided_step
    steps, forwards = [], []
    hook = model.register_forward_hook(lambda module, args, out: forwards.append(args[0].latent.shape[0]))
    try:
        with OpCensus() as census:
            denoise(plan, video, audio, sigmas, step=step, progress=lambda done, total: steps.append(done))
    finally:
        hook.remove()
    assert steps == list(range(1, len(sigmas)))
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    # exactly one forward per step, over a batch of all the active passes (4 guided, 1 distilled)
    assert forwards == [len(plan.runner.passes)] * (len(sigmas) - 1)
    assert len(plan.runner.passes) == (4 if guidance is FULL else 1)


@pytest.mark.parametrize("audio_only", [False, True], ids=["audio-video", "audio-only"])
def test_res2s_steps_never_sync_or_copy_host_data(census_model, audio_only):
    """The res_2s sampler (HQ): two batched forwards per interval (every pass in each), its SDE noise drawn on the
    device, bong and plain intervals and the final prediction at 0.0011: no host reads, no host copies."""
    from ltx2_core.sampling.res2s import Res2sStep, res2s_plan

    model = census_model
    mask = torch.ones(1, FRAMES * ROWS * COLS, 1)
    mask[:, : ROWS * COLS] = 0.0
    positive, negative = _texts(model)
    setup = guided_setup(model, positive, negative, None if audio_only else video_positions(FRAMES, ROWS, COLS, 24.0),
                         audio_positions(AUDIO_TOKENS), *FULL)
    video, audio = _states(video_mask=mask)
    plan = res2s_plan(torch.tensor([1.0, 0.95, 0.9, 0.5, 0.0]))  # bong on the first two intervals, not the third
    assert plan.bong == (True, True, False, False)
    step = Res2sStep(plan, torch.Generator().manual_seed(-1), torch.Generator().manual_seed(9999))
    forwards = []
    hook = model.register_forward_hook(lambda module, args, out: forwards.append(args[1].latent.shape[0]))
    try:
        with OpCensus() as census:
            video, audio = denoise(setup, None if audio_only else video, audio, plan.sigmas, step=step)
    finally:
        hook.remove()
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    passes = len(setup.runner.passes)
    assert passes == (3 if audio_only else 4) and torch.isfinite(audio.latent).all()
    assert forwards == [passes] * (2 * len(plan.bong) + 1)  # 2 per interval + the final one, each batching every pass


def test_steps_with_attention_weights_never_sync_or_copy_host_data(census_model):
    """A weighted IC-LoRA control (`ConditionedStream.attention`): its log bias is made once at set-up and the video
    self-attention of every pass adds it; the steps still never read or copy host data, and the bias changes the
    prediction."""
    model = census_model
    tokens = FRAMES * ROWS * COLS
    weights = torch.ones(1, tokens, tokens)
    weights[:, : ROWS * COLS, ROWS * COLS:] = 0.5  # the first frame's tokens weigh the others half
    weights[:, ROWS * COLS:, : ROWS * COLS] = 0.0  # and are not seen by them
    positive, negative = _texts(model)
    plan = guided_setup(model, positive, negative, video_positions(FRAMES, ROWS, COLS, 24.0),
                        audio_positions(AUDIO_TOKENS), *FULL, video_attention=weights)
    video, audio = _states()
    with OpCensus() as census:
        weighted = denoise(plan, video, audio, ltx2_sigmas(3))
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    plain = denoise(_plan(model, *FULL), video, audio, ltx2_sigmas(3))
    assert (weighted[0].latent - plain[0].latent).abs().max() > 1e-3


@pytest.mark.parametrize("ancestral, passes_per_forward", [(False, None), (True, None), (False, 1)],
                         ids=["guided", "ancestral", "one-pass-per-forward"])
def test_audio_only_steps_never_sync_or_copy_host_data(census_model, ancestral, passes_per_forward):
    """Text to audio: the set-up without video positions, then steps of the audio alone (video None throughout):
    no host reads, no host copies, one forward per group of passes; the modality scale adds no isolated pass."""
    model = census_model
    positive, negative = _texts(model)
    plan = guided_setup(model, positive, negative, None, audio_positions(AUDIO_TOKENS), *FULL,
                        passes_per_forward=passes_per_forward)
    assert plan.runner.passes == ("cond", "uncond", "perturbed") and plan.video_weights is None
    _, audio = _states()
    step = AncestralStep(torch.Generator().manual_seed(5)) if ancestral else guided_step
    sigmas, forwards = ltx2_sigmas(3), []
    hook = model.register_forward_hook(lambda module, args, out: forwards.append(args[0]))
    try:
        with OpCensus() as census:
            video, audio = denoise(plan, None, audio, sigmas, step=step)
    finally:
        hook.remove()
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    assert video is None and forwards == [None] * (len(sigmas) - 1) * (3 if passes_per_forward else 1)
    assert torch.isfinite(audio.latent).all()


@pytest.mark.parametrize("size", [1, 3])
def test_passes_in_groups_give_the_same_run_without_syncs(model, size):
    """The PassRunner seam: passes split over several forwards (less memory; CFG-parallel splits them over GPUs
    the same way) predict what one batched forward predicts."""
    video, audio = _states()
    batched = denoise(_plan(model, *FULL), video, audio, ltx2_sigmas(3))
    plan = _plan(model, *FULL, passes_per_forward=size)
    assert [len(g.passes) for g in plan.runner.groups] == ([1, 1, 1, 1] if size == 1 else [3, 1])
    with OpCensus() as census:
        grouped = denoise(plan, video, audio, ltx2_sigmas(3))
    assert census.syncs() == {} and census.transfers() == 0
    torch.testing.assert_close(grouped[0].latent, batched[0].latent, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grouped[1].latent, batched[1].latent, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="passes_per_forward"):
        _plan(model, *FULL, passes_per_forward=0)


def test_census_sees_a_sync_and_a_host_copy(model):
    """The census is not blind: an .item() and a torch.tensor(list) in a step are counted."""
    plan = _plan(model)
    video, audio = _states()

    def leaky_step(plan, video, audio, sigma, sigma_next):
        sigma = torch.tensor([sigma.item()]).reshape(())
        return guided_step(plan, video, audio, sigma, sigma_next)

    with OpCensus() as census:
        denoise(plan, video, audio, ltx2_sigmas(2), step=leaky_step)
    assert census.syncs() == {"aten._local_scalar_dense": 2}
    assert census.transfers() == 2


def test_changing_every_guidance_scale_does_not_recompile(model):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    step = torch.compile(guided_step, backend="eager", fullgraph=True)
    sigmas = ltx2_sigmas(2)
    other = (GuidanceParams(cfg=2.5, stg=0.5, stg_blocks=(1,), rescale=0.2, modality=1.5),
             GuidanceParams(cfg=4.0, stg=2.0, stg_blocks=(1,), rescale=0.9, modality=2.0))
    results = []
    for guidance in (FULL, other):
        plan = _plan(model, *guidance)
        video, audio = _states()
        results.append(denoise(plan, video, audio, sigmas, step=step)[0].latent)
        eager = denoise(plan, video, audio, sigmas)[0].latent
        torch.testing.assert_close(results[-1], eager, atol=1e-5, rtol=1e-5)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert not counters["recompiles"], dict(counters["recompiles"])
    assert (results[0] - results[1]).abs().max() > 1e-3  # the new scales were used


def test_conditioned_tokens_stay_clean_and_the_rest_moves(model):
    mask = torch.ones(1, FRAMES * ROWS * COLS, 1)
    mask[:, : ROWS * COLS] = 0.0
    video, audio = _states(video_mask=mask)
    torch.testing.assert_close(video.latent[:, : ROWS * COLS], video.clean[:, : ROWS * COLS], atol=1e-7, rtol=0)
    out, _ = denoise(_plan(model, *FULL), video, audio, ltx2_sigmas(3))
    torch.testing.assert_close(out.latent[:, : ROWS * COLS], video.clean[:, : ROWS * COLS], atol=1e-6, rtol=0)
    assert (out.latent[:, ROWS * COLS:] - video.latent[:, ROWS * COLS:]).abs().min() > 0


def test_neutral_scales_drop_passes_at_set_up(model):
    assert _plan(model).runner.passes == ("cond",)
    assert _plan(model, GuidanceParams(cfg=2.0), GuidanceParams()).runner.passes == ("cond", "uncond")
    assert _plan(model, GuidanceParams(stg=1.0, stg_blocks=(0,)), GuidanceParams(modality=2.0)).runner.passes == (
        "cond", "perturbed", "isolated")
    assert _plan(model, *FULL).runner.perturbations.batch_size == 4


def test_cfg_without_a_negative_prompt_is_refused(model):
    positive, _ = _texts(model)
    with pytest.raises(ValueError, match="negative prompt"):
        guided_setup(model, positive, None, video_positions(FRAMES, ROWS, COLS, 24.0), audio_positions(AUDIO_TOKENS),
                     GuidanceParams(cfg=3.0))


def test_last_step_to_zero_returns_the_denoised_estimate():
    from ltx2_core.sampling import euler_step

    latent, x0 = torch.randn(1, 4, 3), torch.randn(1, 4, 3)
    out = euler_step(latent, x0, torch.tensor(0.42), torch.tensor(0.0))
    torch.testing.assert_close(out, x0, atol=1e-6, rtol=0)
    assert StreamState(latent, x0).mask is None


def test_audio_to_video_steps_never_sync_or_copy_host_data(census_model):
    """Audio-to-video: the audio stream held by an encoded sound (per-token timesteps 0, the clean blend), the video
    guided with all four passes, the audio unguided (the reference's a2v guidance): still no sync, no host copy."""
    from ltx2_core.conditioning import EncodedAudio, condition_audio

    model = census_model
    plan = _plan(model, FULL[0], GuidanceParams())
    video, audio = _states()
    sound = torch.randn(1, 8, AUDIO_TOKENS, 16, generator=torch.Generator().manual_seed(7))
    held = condition_audio(audio.latent, audio_positions(AUDIO_TOKENS), [EncodedAudio(sound, 1.0)], 24.0)
    audio = noised_state(held.clean, audio.latent, mask=held.mask)
    with OpCensus() as census:
        video_out, audio_out = denoise(plan, video, audio, ltx2_sigmas(3))
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    assert torch.equal(audio_out.latent, held.clean)  # held exactly through every step: a copy of the clean latent
    assert (video_out.latent - video.latent).abs().max() > 0.1


@pytest.mark.parametrize("guided", [True, False], ids=["guided", "distilled"])
def test_video_to_audio_steps_never_sync_or_copy_host_data(census_model, guided):
    """Sound for a video: the video stream frozen by an encoded video (mask 0 and sigma 0, the reference's frozen
    modality), the audio sampled from noise, guided with all four passes for both or unguided: no sync, no host
    copy; the video stays the encoded latent exactly, the audio moves."""
    from ltx2_core.conditioning import EncodedVideo, condition_video

    model = census_model
    plan = _plan(model, *FULL) if guided else _plan(model)
    video, audio = _states()
    encoded = torch.randn(1, 128, FRAMES, ROWS, COLS, generator=torch.Generator().manual_seed(8))
    held = condition_video(video.latent, video_positions(FRAMES, ROWS, COLS, 24.0), [EncodedVideo(encoded, 1.0)],
                           24.0)
    assert held.frozen and torch.equal(held.mask, torch.zeros_like(held.mask))
    video = noised_state(held.clean, video.latent, mask=held.mask)._replace(frozen=True)
    with OpCensus() as census:
        video_out, audio_out = denoise(plan, video, audio, ltx2_sigmas(3))
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    assert torch.equal(video_out.latent, held.clean)
    assert (audio_out.latent - audio.latent).abs().max() > 0.1


def test_ic_lora_control_steps_never_sync_or_copy_host_data(census_model):
    """IC-LoRA control: a half-size control's tokens appended after the video's (positions scaled ×2, mask 0: kept
    clean) with all four passes guided for both streams: no sync, no host copy; the control tokens stay their
    encoded values exactly, the video moves."""
    from ltx2_core.conditioning import EncodedControl, condition_video

    model = census_model
    positive, negative = _texts(model)
    video, audio = _states()
    control = torch.randn(1, 128, FRAMES, 1, 2, generator=torch.Generator().manual_seed(9))
    held = condition_video(video.latent, video_positions(FRAMES, ROWS, COLS, 24.0),
                           [EncodedControl(control, 1.0, 2)], 24.0)
    assert held.clean.shape[1] == FRAMES * ROWS * COLS + FRAMES * 2 and held.attention is None
    plan = guided_setup(model, positive, negative, held.positions, audio_positions(AUDIO_TOKENS), *FULL)
    noise = torch.randn(held.clean.shape, generator=torch.Generator().manual_seed(10))
    video = noised_state(held.clean, noise, mask=held.mask)
    with OpCensus() as census:
        video_out, _ = denoise(plan, video, audio, ltx2_sigmas(3))
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    assert torch.equal(video_out.latent[:, held.tokens:], held.clean[:, held.tokens:])
    assert (video_out.latent[:, :held.tokens] - noise[:, :held.tokens]).abs().max() > 0.1


@pytest.mark.parametrize("guided", [True, False], ids=["guided", "distilled"])
def test_retake_steps_never_sync_or_copy_host_data(census_model, guided):
    """Retake: both streams hold their encoded latents outside a span (per-token masks 0 / 1, neither frozen), the
    span regenerated from noise, guided with all four passes for both or unguided: no sync, no host copy; the
    tokens outside the span stay the encoded latents exactly, those inside move."""
    from ltx2_core.conditioning import EncodedAudio, EncodedVideo, condition_audio, condition_video

    model = census_model
    plan = _plan(model, *FULL) if guided else _plan(model)
    video, audio = _states()
    g = torch.Generator().manual_seed(9)
    encoded = torch.randn(1, 128, FRAMES, ROWS, COLS, generator=g)
    sound = torch.randn(1, 8, AUDIO_TOKENS, 16, generator=g)
    span = (0.05, 0.2)  # video latent frame 1 ([1/24, 9/24) s); audio latents 2 to 5 (n: [4n − 3, 4n + 1) × 10 ms)
    conditions = [EncodedVideo(encoded, 1.0, span), EncodedAudio(sound, 1.0, span)]
    held_video = condition_video(video.latent, video_positions(FRAMES, ROWS, COLS, 24.0), conditions, 24.0)
    held_audio = condition_audio(audio.latent, audio_positions(AUDIO_TOKENS), conditions, 24.0)
    assert not held_video.frozen and not held_audio.frozen
    assert held_video.mask[0, :, 0].tolist() == [0.0] * (ROWS * COLS) + [1.0] * (ROWS * COLS)
    assert held_audio.mask[0, :, 0].tolist() == [0.0] * 2 + [1.0] * 4 + [0.0] * 3
    video = noised_state(held_video.clean, video.latent, mask=held_video.mask)
    audio = noised_state(held_audio.clean, audio.latent, mask=held_audio.mask)
    with OpCensus() as census:
        video_out, audio_out = denoise(plan, video, audio, ltx2_sigmas(3))
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    for out, held in ((video_out, held_video), (audio_out, held_audio)):
        kept = held.mask[0, :, 0] == 0
        assert torch.equal(out.latent[:, kept], held.clean[:, kept])
        assert (out.latent[:, ~kept] - held.clean[:, ~kept]).abs().max() > 0.1


def test_a_frozen_stream_is_fed_sigma_zero_and_the_other_its_sigma(model):
    """The frozen flag reaches the transformer as the stream's sigma (0) while the other stream keeps σ; a held
    stream that is not frozen (an image at strength 1, A2V) keeps σ."""
    from ltx2_core.sampling.denoise import guided_prediction

    seen = []

    class Recording:
        passes = ("cond",)

        def __call__(self, video_in, audio_in):
            seen.append((video_in.sigma.clone(), audio_in.sigma.clone()))
            return video_in.latent.float(), audio_in.latent.float()

    video, audio = _states(video_mask=torch.zeros(1, FRAMES * ROWS * COLS, 1))
    setup = _plan(model)._replace(runner=Recording())
    sigma = torch.tensor(0.7)
    guided_prediction(setup, video._replace(frozen=True), audio, sigma)
    guided_prediction(setup, video, audio, sigma)
    assert seen[0][0].tolist() == [0.0] and seen[0][1].tolist() == pytest.approx([0.7])
    assert seen[1][0].tolist() == pytest.approx([0.7])
