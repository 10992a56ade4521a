"""Text to audio (`Request.audio_only`): the request's checks, the tiny end-to-end run on the demo models (the
transformer never sees video, only the audio noise is drawn, only the audio decoder runs, no frames come back),
saving, and the multi-GPU paths refusing it before any work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ltx2_core import media, stages
from ltx2_core.conditioning.images import EncodedImage, ImageCondition
from ltx2_core.demo import demo_models
from ltx2_core.geometry import audio_latent_length, audio_positions
from ltx2_core.pipeline import Distribution, LocalSampler, Request, generate, guidance_for
from ltx2_core.runtime import WorkerSampler, generate_on_workers
from ltx2_core.sampling import GuidanceParams, ltx2_sigmas
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import AVLatent, Generation, empty_audio_latent, sample

T2A = {"prompt": "rain on a tin roof", "frames": 25, "fps": 24.0, "steps": 2, "audio_only": True}
AUDIO_TOKENS = audio_latent_length(25, 24.0)  # 26: 25/24 s at 25 latents a second


@pytest.fixture(scope="module")
def models():
    return demo_models("2.5")


@pytest.mark.parametrize("changes, message", [
    ({"mode": "two-stage"}, "runs one stage, got mode two-stage; set mode to one-stage"),
    ({"mode": "distilled"}, "runs one stage, got mode distilled; set mode to one-stage"),
    ({"images": (ImageCondition(np.zeros((32, 32, 3), np.uint8)),)}, "no video to hold images in; drop the images"),
    ({"frames": 24}, "frames must be 8k\\+1 \\(text to audio lasts frames / fps seconds\\), got 24"),
    ({"frames": 0}, "frames must be 8k\\+1"),
    ({"audio_only": 1}, "audio_only must be True or False"),
    ({"fps": 0.0}, "fps must be a positive number"),
])
def test_bad_audio_only_requests_are_refused_naming_the_fix(changes, message):
    with pytest.raises(ValueError, match=message):
        Request(**(T2A | changes)).check()


def test_the_video_size_is_not_checked_without_video():
    Request(**T2A, width=100, height=7).check()  # unused: no error
    with pytest.raises(ValueError, match="multiples of 32"):
        Request(**(T2A | {"audio_only": False}), width=100, height=7).check()


def test_guidance_is_the_audio_s_with_modality_one(models):
    config = models.transformer.config
    video, audio = guidance_for(Request(**T2A), config)
    _, default_audio = guidance_for(Request(**(T2A | {"audio_only": False})), config)
    assert video == GuidanceParams() and audio.modality == 1.0 and default_audio.modality != 1.0
    assert (audio.cfg, audio.stg, audio.rescale, audio.stg_blocks) == (
        default_audio.cfg, default_audio.stg, default_audio.rescale, default_audio.stg_blocks)
    mine = GuidanceParams(cfg=4.0, modality=2.0)
    assert guidance_for(Request(**T2A, audio_guidance=mine), config)[1] == GuidanceParams(cfg=4.0)


def test_generate_samples_and_decodes_the_audio_alone(models, monkeypatch):
    inputs, drawn = [], []
    hook = models.transformer.register_forward_hook(lambda module, args, out: inputs.append((args[0], out[0])))
    real_noised = stages.noised_stream
    monkeypatch.setattr(stages, "noised_stream", lambda stream, own, noise, *a: drawn.append(noise.clone())
                        or real_noised(stream, own, noise, *a))

    def no_video(*args, **kwargs):
        raise AssertionError("text to audio must not decode video")

    monkeypatch.setattr(stages, "decode_video", no_video)
    try:
        first = generate(Request(**T2A, seed=3), models)
    finally:
        hook.remove()
    assert first.frames is None and first.fps == 24.0
    assert first.waveform.ndim == 2 and first.waveform.shape[0] == 2 and first.waveform.shape[1] > 0
    assert torch.isfinite(first.waveform).all() and first.sample_rate > 0
    assert len(inputs) == 2 and all(video is None and out is None for video, out in inputs)  # 2 steps, 1 forward each
    # one noise draw, the audio's, first from the seeded generator (the reference's T2A draws no video noise)
    assert len(drawn) == 1 and drawn[0].shape == (1, AUDIO_TOKENS, 128)
    torch.testing.assert_close(drawn[0], torch.randn(drawn[0].shape, generator=torch.Generator().manual_seed(3)))
    again, other = generate(Request(**T2A, seed=3), models), generate(Request(**T2A, seed=4), models)
    torch.testing.assert_close(again.waveform, first.waveform, atol=1e-4, rtol=0)
    assert (other.waveform - first.waveform).abs().max() > 1e-3


def test_an_audio_only_generation_saves_through_write_audio(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(media, "write_audio", lambda path, samples, rate: calls.append((path, samples, rate)) or path,
                        raising=False)
    waveform = torch.zeros(2, 160)
    generation = Generation(None, waveform, 16000, 24.0)
    for suffix in (".wav", ".FLAC", ".m4a", ".mp4"):
        path = tmp_path / f"sound{suffix}"
        assert generation.save(path) == str(path)
    assert [(p.name, s is waveform, r) for p, s, r in calls] == [
        ("sound.wav", True, 16000), ("sound.FLAC", True, 16000), ("sound.m4a", True, 16000),
        ("sound.mp4", True, 16000)]
    with pytest.raises(ValueError, match="audio-only generation is saved as .wav, .flac, .m4a, .mp4"):
        generation.save(tmp_path / "sound.png")


def test_an_audio_only_latent(models):
    latent = empty_audio_latent(25, 24.0)
    assert latent.video is None and latent.audio.shape == (1, 8, AUDIO_TOKENS, 16) and latent.fps == 24.0
    with pytest.raises(ValueError, match="frames must be 8k\\+1"):
        empty_audio_latent(24, 24.0)
    with pytest.raises(ValueError, match="no video size"):
        _ = latent.pixel_size
    image = EncodedImage(torch.zeros(1, 128, 1, 2, 2), 0, 1.0)
    with pytest.raises(ValueError, match="a condition of the video stream was given for an audio-only latent"):
        sample(models.transformer, None, None, latent, Stage(ltx2_sigmas(2), conditions=(image,)),
               torch.Generator())


class _Controller:
    config, device_type = None, "cpu"


def test_multi_gpu_paths_refuse_text_to_audio_before_any_work(models):
    request = Request(**T2A)
    with pytest.raises(ValueError, match="text to audio runs on one GPU; load the model without parallelism"):
        generate(request, models, distribution=Distribution(runner=lambda *args: None))
    with pytest.raises(ValueError, match="runs on one GPU"):
        generate(request, models, distribution=Distribution(decodes=False))
    with pytest.raises(ValueError, match="runs on one GPU"):  # rank 0 of a TP / SP run: its prompts are broadcast
        generate(request, models, distribution=Distribution(prompts=lambda encode_here: encode_here()))
    with pytest.raises(ValueError, match="runs on one GPU"):
        generate_on_workers(None, request, models)
    latent = empty_audio_latent(25, 24.0)
    for sampler in (LocalSampler(models.transformer, runner=lambda *args: None), WorkerSampler(_Controller())):
        with pytest.raises(ValueError, match="runs on one GPU"):
            sampler(None, None, latent, Stage(ltx2_sigmas(2)), torch.Generator())


def test_the_parallel_models_refuse_an_audio_only_run(models):
    """Tensor- and sequence-parallel `prepare_run`s (what torchrun ranks wrap the model in) name the fix."""
    from ltx2_core.parallel.sequence_parallel import LocalTokensRun
    from ltx2_core.parallel.tensor_parallel import LocalHeadsRun

    model = models.transformer
    context = torch.zeros(1, 4, model.config.audio.context_dim)
    with pytest.raises(ValueError, match="without tensor parallelism"):
        LocalHeadsRun(model.prepare_run, 0, 2)(None, audio_positions(AUDIO_TOKENS), None, context)
    with pytest.raises(ValueError, match="without sequence parallelism"):
        LocalTokensRun(model.prepare_run, None)(None, audio_positions(AUDIO_TOKENS), None, context)


def test_decoding_an_audio_latent_runs_no_video_decoder(models, monkeypatch):
    def no_video(*args, **kwargs):
        raise AssertionError("no video decode")

    monkeypatch.setattr(stages, "decode_video", no_video)
    latent = AVLatent(None, torch.randn(1, 8, AUDIO_TOKENS, 16, generator=torch.Generator().manual_seed(0)), 24.0)
    generation = stages.decode(latent, models.decoders)
    assert generation.frames is None and generation.waveform.shape[0] == 2
