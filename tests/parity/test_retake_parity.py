"""Retake (regenerate [start, end) s of a clip) vs the reference's `RetakePipeline` of ltx-pipelines 1.0.0 (LTX-2.0
and 2.3, in this Python): its `TemporalRegionMask` on `noise_video_state` / `noise_audio_state` with the encoded
latents as initial values, then `euler_denoising_loop`, guided (LTX2 schedule, 3 steps, both guiders with negative
contexts) or distilled (the 8-step table, no guidance), on the same tiny fp32 weights with the same seeded noiser
(video noise drawn first, then audio, as ours). The encoded latents are random (the encoders' parity is
tests/parity/test_video_vae_parity.py and the audio VAE's).

* masks and noised states: exact (measured max |Δ| 0) for spans inside a latent frame, across frames, on a border
  and over the whole clip; tolerance 1e-5.
* denoising: max |Δ| of the final latents ≤ 1e-4 (atol=rtol, as the other loops); measured in the test names' print.
"""

from __future__ import annotations

import pytest
import torch

from ltx2_core.conditioning import EncodedAudio, EncodedVideo, Retake, condition_audio, condition_video
from ltx2_core.geometry import audio_latent_length, audio_positions, latent_shape, video_positions
from ltx2_core.pipeline import LocalSampler, Models, Request, sample_request
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.sampling.steps import noised_state

TOL = {"atol": 1e-4, "rtol": 1e-4}
FRAMES, HEIGHT, WIDTH, FPS, SEED = 17, 64, 96, 24.0, 13
SPANS = [(0.2, 0.5), (0.0, 0.03), (9 / 24, 17 / 24), (0.0, 17 / 24), (0.1, 0.11)]
GUIDANCE = default_guidance("2.0", 3)  # 2.0's and 2.3's scales are the same


def _latents(seed: int = 21):
    g = torch.Generator().manual_seed(seed)
    video = torch.randn(1, 128, *latent_shape(FRAMES, HEIGHT, WIDTH), generator=g)
    audio = torch.randn(1, 8, audio_latent_length(FRAMES, FPS), 16, generator=g)
    return video, audio


def _reference_states(span, video_latent, audio_latent, regenerate_video=True, regenerate_audio=True):
    """1.0.0's noised states as `RetakePipeline.__call__` builds them."""
    from support.reference import import_ltx_pipelines

    import_ltx_pipelines()
    from ltx_core.components.noisers import GaussianNoiser
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.retake import TemporalRegionMask
    from ltx_pipelines.utils.helpers import noise_audio_state, noise_video_state
    from ltx_pipelines.utils.types import PipelineComponents

    cpu = torch.device("cpu")
    shape = VideoPixelShape(batch=1, frames=FRAMES, width=WIDTH, height=HEIGHT, fps=FPS)
    components = PipelineComponents(dtype=torch.float32, device=cpu)
    noiser = GaussianNoiser(torch.Generator().manual_seed(SEED))
    start, end = span
    video = noise_video_state(shape, noiser, [TemporalRegionMask(start if regenerate_video else 0.0,
                                                                  end if regenerate_video else 0.0, FPS)],
                              components, torch.float32, cpu, initial_latent=video_latent)
    audio_conditions = [] if audio_latent is None else [
        TemporalRegionMask(start if regenerate_audio else 0.0, end if regenerate_audio else 0.0, FPS)]
    audio = noise_audio_state(shape, noiser, audio_conditions, components, torch.float32, cpu,
                              initial_latent=audio_latent)
    return video, audio


def _our_states(span, video_latent, audio_latent, regenerate_video=True, regenerate_audio=True):
    frames, rows, cols = latent_shape(FRAMES, HEIGHT, WIDTH)
    tokens = audio_latent_length(FRAMES, FPS)
    conditions = [EncodedVideo(video_latent, 1.0, span if regenerate_video else None)]
    if audio_latent is not None:
        conditions.append(EncodedAudio(audio_latent, 1.0, span if regenerate_audio else None))
    video = condition_video(torch.zeros(1, frames * rows * cols, 128), video_positions(frames, rows, cols, FPS),
                            conditions, FPS)
    audio = condition_audio(torch.zeros(1, tokens, 128), audio_positions(tokens), conditions, FPS)
    g = torch.Generator().manual_seed(SEED)
    noise_video, noise_audio = torch.randn(video.clean.shape, generator=g), torch.randn(audio.clean.shape, generator=g)
    return (video, noised_state(video.clean, noise_video, 1.0, video.mask)), \
        (audio, noised_state(audio.clean, noise_audio, 1.0, audio.mask))


@pytest.mark.parametrize("span", SPANS, ids=lambda s: f"{s[0]:.3f}-{s[1]:.3f}")
def test_masks_and_noised_states_match_the_100_retake(span):
    video_latent, audio_latent = _latents()
    (ref_video, _), (ref_audio, _) = _reference_states(span, video_latent, audio_latent)
    (video, video_state), (audio, audio_state) = _our_states(span, video_latent, audio_latent)
    for ours, stream, ref in ((video_state, video, ref_video), (audio_state, audio, ref_audio)):
        mask = stream.denoise_mask()[..., 0]
        want = ref.denoise_mask.reshape(mask.shape)
        torch.testing.assert_close(mask, want, atol=1e-5, rtol=0)
        torch.testing.assert_close(ours.latent, ref.latent, atol=1e-5, rtol=0)
        torch.testing.assert_close(stream.clean, ref.clean_latent, atol=1e-5, rtol=0)
        assert 0 < float(mask.sum()) <= mask.numel()  # the span meets some tokens
    assert not video.frozen and not audio.frozen


def test_a_kept_stream_is_held_whole_and_frozen():
    video_latent, audio_latent = _latents()
    (ref_video, _), (ref_audio, _) = _reference_states((0.2, 0.5), video_latent, audio_latent,
                                                       regenerate_video=False, regenerate_audio=False)
    (video, _), (audio, _) = _our_states((0.2, 0.5), video_latent, audio_latent, False, False)
    assert float(ref_video.denoise_mask.abs().max()) == 0 == float(ref_audio.denoise_mask.abs().max())
    assert float(video.mask.abs().max()) == 0 == float(audio.mask.abs().max())
    assert video.frozen and audio.frozen


def _reference_run(ref, positive, negative, span, video_latent, audio_latent, guided, regenerate_video):
    from ltx_core.components.diffusion_steps import EulerDiffusionStep
    from ltx_core.components.guiders import MultiModalGuider, MultiModalGuiderParams
    from ltx_core.components.schedulers import LTX2Scheduler
    from ltx_core.model.transformer import X0Model
    from ltx_pipelines.utils.constants import DISTILLED_SIGMA_VALUES
    from ltx_pipelines.utils.helpers import multi_modal_guider_denoising_func, simple_denoising_func
    from ltx_pipelines.utils.samplers import euler_denoising_loop

    (video, video_tools), (audio, audio_tools) = _reference_states(span, video_latent, audio_latent,
                                                                   regenerate_video=regenerate_video)
    transformer = X0Model(ref)
    if guided:
        sigmas = LTX2Scheduler().execute(steps=3).to(torch.float32)
        params = [MultiModalGuiderParams(cfg_scale=p.cfg, stg_scale=p.stg, stg_blocks=list(p.stg_blocks),
                                         rescale_scale=p.rescale, modality_scale=p.modality) for p in GUIDANCE]
        fn = multi_modal_guider_denoising_func(
            MultiModalGuider(params=params[0], negative_context=negative.video),
            MultiModalGuider(params=params[1], negative_context=negative.audio),
            v_context=positive.video, a_context=positive.audio, transformer=transformer)
    else:
        sigmas = torch.tensor(DISTILLED_SIGMA_VALUES, dtype=torch.float32)
        fn = simple_denoising_func(video_context=positive.video, audio_context=positive.audio, transformer=transformer)
    video, audio = euler_denoising_loop(sigmas, video, audio, EulerDiffusionStep(), fn)
    return (video_tools.unpatchify(video_tools.clear_conditioning(video)).latent,
            audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent)


CASES = {  # name: (guided, span, regenerate_video, the file has sound)
    "guided": (True, (0.2, 0.5), True, True),
    "distilled": (False, (0.2, 0.5), True, True),
    "guided-keep-video": (True, (0.0, 0.3), False, True),
    "distilled-silent": (False, (0.4, 17 / 24), True, False),
}


@pytest.mark.parametrize("version", ["2.0", "2.3"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_retake_is_sampled_as_the_100_reference_samples_it(version, case, one_thread):
    from parity.test_denoise_parity import _models, _texts

    guided, span, regenerate_video, sound = CASES[case]
    ours, ref = _models(version)
    positive, negative = _texts(ours.config)
    video_latent, audio_latent = _latents()
    audio_latent = audio_latent if sound else None
    assert default_guidance(version, 3) == GUIDANCE
    request = Request("unused", width=WIDTH, height=HEIGHT, frames=FRAMES, fps=FPS, seed=SEED,
                      steps=3 if guided else None, mode="one-stage" if guided else "distilled",
                      retake=Retake("unused.mp4", *span, regenerate_video=regenerate_video))
    held = (EncodedVideo(video_latent, 1.0, span if regenerate_video else None),
            None if audio_latent is None else EncodedAudio(audio_latent, 1.0, span))
    got, _ = sample_request(request, Models(ours, None, None), positive, negative if guided else None,
                            sampler=LocalSampler(ours), retake=held)
    want_video, want_audio = _reference_run(ref, positive, negative, span, video_latent, audio_latent, guided,
                                            regenerate_video)
    print(version, case, "max |Δ| video", float((got.video - want_video).abs().max()),
          "audio", float((got.audio - want_audio).abs().max()))
    torch.testing.assert_close(got.video, want_video, **TOL)
    torch.testing.assert_close(got.audio, want_audio, **TOL)
    # the held latent frames are the source's exactly; the span's moved away from it (not vacuous)
    kept = EncodedVideo(video_latent, 1.0, span if regenerate_video else None)
    frames, rows, cols = latent_shape(FRAMES, HEIGHT, WIDTH)
    stream = condition_video(torch.zeros(1, frames * rows * cols, 128), video_positions(frames, rows, cols, FPS),
                             [kept], FPS)
    inside = stream.denoise_mask()[0, :, 0].reshape(frames, rows, cols)[:, 0, 0].bool()
    assert torch.equal(got.video[:, :, ~inside], video_latent[:, :, ~inside])
    if inside.any():
        assert (got.video[:, :, inside] - video_latent[:, :, inside]).abs().max() > 0.1
    if sound:
        tokens = audio_latent_length(FRAMES, FPS)
        audio_inside = condition_audio(torch.zeros(1, tokens, 128), audio_positions(tokens),
                                       [EncodedAudio(audio_latent, 1.0, span)], FPS).mask[0, :, 0].bool()
        assert torch.equal(got.audio[:, :, ~audio_inside], audio_latent[:, :, ~audio_inside])
        assert (got.audio[:, :, audio_inside] - audio_latent[:, :, audio_inside]).abs().max() > 0.1
