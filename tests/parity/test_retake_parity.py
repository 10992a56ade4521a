"""Retake (regenerate [start, end) s of a clip) vs the reference's `RetakePipeline` of ltx-pipelines 1.0.0 (LTX-2.0
and 2.3, in this Python): its `TemporalRegionMask` on `noise_video_state` / `noise_audio_state` with the encoded
latents as initial values, then `euler_denoising_loop`, guided (LTX2 schedule, 3 steps, both guiders with negative
contexts) or distilled (the 8-step table, no guidance), on the same tiny fp32 weights with the same seeded noiser
(video noise drawn first, then audio, as ours). The encoded latents are random (the encoders' parity is
tests/parity/test_video_vae_parity.py and the audio VAE's).

* masks and noised states: exact (measured max |Δ| 0) for spans inside a latent frame, across frames, on a border
  and over the whole clip; tolerance 1e-5.
* denoising: max |Δ| of the final latents ≤ 1e-4 (atol=rtol, as the other loops); measured (guided 3 steps /
  distilled 8): 2.0 video 9.5e-6 / 7.2e-7, audio 8.1e-6 / 4.8e-7; 2.3 video 7.6e-6 / 7.2e-7, audio 1.0e-5 / 4.8e-7;
  the video kept whole: exact, its sound 1.0e-5; a silent file (audio generated whole) ≤ 7.2e-7.

LTX-2.5 against 1.2.0's `RetakePipeline` (run in the reference's own Python, tests/parity/ref120/retake.py) with both
streams regenerated in the span (`ModalitySpec(conditionings=[TemporalRegionMask])`, not frozen), guided and
distilled, with sound and silent: masks and initial states ≤ 1e-5, final latents ≤ 1e-4 (measured: guided video
1.0e-5 audio 8.3e-6, distilled 7.2e-7 / 4.8e-7, guided on a silent file 9.1e-6 / 1.3e-5). A
stream kept whole is 1.2.0's frozen modality, whose parity and the one deviation (we hold it clean; 1.2.0's retake
leaves noise_scale 1) are tests/parity/test_video_to_audio_parity.py's.
"""

from __future__ import annotations

import pytest
import torch
from support.reference120 import run_reference
from support.transformer25 import transformer25_metadata, write_transformer25

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import EncodedAudio, EncodedVideo, Retake, condition_audio, condition_video
from ltx2_core.geometry import audio_latent_length, audio_positions, latent_shape, video_positions
from ltx2_core.demo import demo_transformer
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.pipeline import LocalSampler, Models, Request, sample_request
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.sampling.steps import noised_state
from ltx2_core.types import TextEmbeddings

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


CASES_25 = {  # name: (guided, span, the file has sound)
    "guided": (True, (0.2, 0.5), True),
    "distilled": (False, (0.05, 0.3), True),
    "guided-silent": (True, (0.4, 17 / 24), False),
}


def _guidance(params) -> dict:
    return {"cfg": params.cfg, "stg": params.stg, "stg_blocks": list(params.stg_blocks), "rescale": params.rescale,
            "modality": params.modality}


@pytest.fixture(scope="module")
def runs_25(tmp_path_factory):
    """(ours, reference): the final latents, masks and initial states of each LTX-2.5 case, by name."""
    folder = tmp_path_factory.mktemp("retake25")
    config = TransformerConfig.tiny("2.5")
    path = folder / "transformer-2.5.safetensors"
    write_transformer25(path, demo_transformer(config, seed=2).state_dict(), config,
                        metadata=transformer25_metadata(config, model_version="2.5.0"))
    model = load_transformer(path)
    g = torch.Generator().manual_seed(5)
    positive, negative = (TextEmbeddings(torch.randn(1, 8, config.video.context_dim, generator=g),
                                         torch.randn(1, 8, config.audio.context_dim, generator=g)) for _ in range(2))
    tensors = {"2.5.positive_video": positive.video, "2.5.positive_audio": positive.audio,
               "2.5.negative_video": negative.video, "2.5.negative_audio": negative.audio}
    settings, ours = {"cases": {}}, {}
    for name, (guided, span, sound) in CASES_25.items():
        video_latent, audio_latent = _latents(seed=len(name))
        request = Request("unused", width=WIDTH, height=HEIGHT, frames=FRAMES, fps=FPS, seed=SEED,
                          steps=3 if guided else None, mode="one-stage" if guided else "distilled",
                          retake=Retake("unused.mp4", *span))
        held = (EncodedVideo(video_latent, 1.0, span), EncodedAudio(audio_latent, 1.0, span) if sound else None)
        got, _ = sample_request(request, Models(model, None, None), positive, negative if guided else None,
                                sampler=LocalSampler(model), retake=held)
        (video, video_state), (audio, audio_state) = _our_states(span, video_latent, audio_latent if sound else None)
        ours |= {f"{name}.video": got.video, f"{name}.audio": got.audio, f"{name}.video_mask": video.denoise_mask(),
                 f"{name}.audio_mask": audio.denoise_mask(), f"{name}.video_start": video_state.latent,
                 f"{name}.audio_start": audio_state.latent}
        noise = torch.Generator().manual_seed(SEED)  # what the stage drew: video, then audio
        tensors |= {f"{name}.noise_video": torch.randn(video.clean.shape, generator=noise),
                    f"{name}.noise_audio": torch.randn(audio.clean.shape, generator=noise),
                    f"{name}.video_latent": video_latent, f"{name}.audio_latent": audio_latent}
        settings["cases"][name] = {"path": str(path), "text": "2.5", "frames": FRAMES, "height": HEIGHT,
                                   "width": WIDTH, "fps": FPS, "steps": 3, "distilled": not guided, "span": span,
                                   "sound": sound, "guidance": [_guidance(p) for p in default_guidance("2.5", 3)]}
    return ours, run_reference("retake.py", tensors, settings, tmp_path=folder)


@pytest.mark.parametrize("case", list(CASES_25))
def test_the_25_retake_is_sampled_as_the_120_reference_samples_it(runs_25, case):
    ours, want = runs_25
    for stream in ("video", "audio"):
        mask = ours[f"{case}.{stream}_mask"]
        torch.testing.assert_close(mask, want[f"{case}.{stream}_mask"].reshape(mask.shape), atol=1e-5, rtol=0)
        torch.testing.assert_close(ours[f"{case}.{stream}_start"], want[f"{case}.{stream}_start"], atol=1e-5, rtol=0)
    print("2.5", case, "max |Δ| video", float((ours[f"{case}.video"] - want[f"{case}.video"]).abs().max()),
          "audio", float((ours[f"{case}.audio"] - want[f"{case}.audio"]).abs().max()))
    torch.testing.assert_close(ours[f"{case}.video"], want[f"{case}.video"], **TOL)
    torch.testing.assert_close(ours[f"{case}.audio"], want[f"{case}.audio"], **TOL)
