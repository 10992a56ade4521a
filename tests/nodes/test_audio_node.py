"""LTX2AudioCondition takes any ComfyUI AUDIO (mono or stereo, any rate, the first of a batch), cuts it to
[start, start + duration) and says how many frames it covers; bad input is refused with the fix when the node runs.
The sampler holds the sound (the latent carries it sample for sample), as the pipeline does, and the decoder and the
generate node hand it back unchanged in ComfyUI's AUDIO format."""

from __future__ import annotations

import math

import pytest
import torch

from ltx2_core import Models
from ltx2_core.audio_io import Waveform
from ltx2_core.conditioning.audio import AudioCondition, EncodedAudio, encode_audio_condition
from ltx2_core.pipeline import Request, sample_request
from support.node_calls import node


def _comfy(samples: torch.Tensor, rate: int) -> dict:
    """ComfyUI's AUDIO of one sound (C, S) or a batch (B, C, S)."""
    return {"waveform": samples if samples.dim() == 3 else samples[None], "sample_rate": rate}


def _tone(seconds: float, rate: int, channels: int = 1, seed: int = 0) -> torch.Tensor:
    """(channels, S) float32: a chord with some noise, different per channel."""
    t = torch.arange(round(seconds * rate)) / rate
    noise = torch.randn(channels, t.numel(), generator=torch.Generator().manual_seed(seed))
    return torch.stack([0.3 * torch.sin(2 * math.pi * (220 + 110 * c) * t) + 0.2 * torch.sin(2 * math.pi * 330 * t)
                        for c in range(channels)]) + 0.02 * noise


@pytest.mark.parametrize("channels, rate", [(1, 16000), (2, 24000), (2, 44100), (1, 44100)])
def test_mono_and_stereo_at_any_rate_become_a_clip_of_the_sound(channels, rate):
    samples = _tone(2.0, rate, channels)
    condition, frames = node("LTX2AudioCondition", _comfy(samples, rate), 0.25, 1.0, 0.8, 24.0)
    assert isinstance(condition, AudioCondition) and condition.start == 0 and condition.strength == 0.8
    first = round(0.25 * rate)
    assert condition.audio.rate == rate and condition.audio.samples.dtype == torch.float32
    assert torch.equal(condition.audio.samples, samples[:, first:first + rate])  # [start, start + duration)
    assert frames == 17  # 1 s at 24 fps covers 24 frames; the last 8k+1 below is 17
    condition.check(frames / 24)  # the clip it gives is long enough for the frames it says


def test_the_first_sound_of_a_batch_is_taken_and_duration_0_runs_to_the_end():
    batch = torch.stack([_tone(1.5, 22050, 2, seed=1), _tone(1.5, 22050, 2, seed=2)])
    condition, frames = node("LTX2AudioCondition", _comfy(batch.half(), 22050), 0.5, 0.0, 1.0, 24.0)
    assert torch.equal(condition.audio.samples, batch[0, :, 11025:].half().float())  # float16 in: float32 out
    assert frames == 17 and condition.audio.seconds == 1.0


@pytest.mark.parametrize("samples, rate, fps, frames", [
    (6000, 16000, 24.0, 9),  # 0.375 s: exactly 9 frames
    (5999, 16000, 24.0, 1),  # a sample short of 9
    (round(5.1 * 44100), 44100, 24.0, 121),  # 5 s at 24 fps
    (48000, 48000, 25.0, 25),  # 1 s at 25 fps
    (100 * 16000, 16000, 24.0, 1441),  # a long song: at most the frames a latent may have
])
def test_frames_is_the_longest_clip_the_sound_covers(samples, rate, fps, frames):
    sound = torch.zeros(1, samples)
    condition, got = node("LTX2AudioCondition", _comfy(sound, rate), 0.0, 0.0, 1.0, fps)
    assert got == frames and (got - 1) % 8 == 0
    assert round(got / fps * rate) <= samples
    condition.check(got / fps)


@pytest.mark.parametrize("audio, start, match", [
    (_comfy(torch.zeros(3, 16000), 16000), 0.0, r"1 \(mono\) or 2 \(stereo\) channels, got \(3, 16000\); downmix"),
    (_comfy(torch.zeros(1, 0), 16000), 0.0, "no samples; give a sound at least one sample long"),
    (_comfy(torch.zeros(0, 1, 16000), 16000), 0.0, "empty batch"),
    (_comfy(torch.tensor([[0.1, float("nan"), 0.2] * 8000]), 16000), 0.0, "8000 NaN.*repair the sound"),
    (_comfy(torch.zeros(1, 16000), 16000), 1.0, r"start 1 s is past the end of the sound \(it lasts 1.000 s\)"),
    (_comfy(torch.zeros(1, 16000), 16000), 0.99, "less than one frame at 24 fps; use a longer sound"),
    (_comfy(torch.full((1, 16000), 1.5), 16000), 0.0, "above full scale.*lower its volume or normalise it"),
    (_comfy(torch.zeros(1, 16000, dtype=torch.int16), 16000), 0.0, "float in .*scale integer samples"),
    ({"waveform": torch.zeros(16000), "sample_rate": 16000}, 0.0, r"\(batch, channels, samples\)"),
    (_comfy(torch.zeros(1, 16000), 0), 0.0, "sample rate must be a positive whole number"),
])
def test_bad_audio_is_refused_naming_the_fix(audio, start, match):
    with pytest.raises(ValueError, match=match):
        node("LTX2AudioCondition", audio, start, 0.0, 1.0, 24.0)


def _models(model, encoder) -> Models:
    return Models(model.host.transformer, encoder, model.decoders, video_encoder=model.video_encoder,
                  audio_encoder=model.audio_encoder)


@pytest.mark.parametrize("channels, rate", [(1, 16000), (2, 44100)])
def test_the_sampler_holds_the_sound_as_the_pipeline_and_the_decoder_returns_it(loaded, channels, rate):
    """Strength 1: the latent's audio is the encoded clip and its sound the clip itself, sample for sample; the
    guided run equals the pipeline's own (release guidance with the audio guidance off, the uncond pass's audio
    context positive); the decoder hands the clip back as ComfyUI AUDIO (1, C, S) at its own rate."""
    model, encoder, conditioning, _ = loaded
    samples = _tone(1.0, rate, channels)
    sound, frames = node("LTX2AudioCondition", _comfy(samples, rate), 0.1, 0.5, 1.0, 24.0)
    assert frames == 9
    (latent,) = node("LTX2EmptyLatent", 96, 64, frames, 24.0)
    (guidance,) = node("LTX2Guidance", model, cfg=3.0, stg=1.0, rescale=0.7, modality=3.0, stg_blocks="auto",
                       audio_cfg=7.0, audio_stg=1.0, audio_rescale=0.7, audio_modality=3.0, audio_stg_blocks="auto")
    (out,) = node("LTX2Sampler", model, conditioning, latent, 4, 2, "ltx2", guidance=guidance, audio=sound)
    clip = samples[:, round(0.1 * rate):round(0.1 * rate) + round(9 / 24 * rate)]
    assert out.sound.rate == rate and torch.equal(out.sound.samples, clip)
    encoded, _ = encode_audio_condition(sound, model.audio_encoder, 9 / 24, latent.audio.shape[2])
    assert torch.equal(out.audio, encoded.latent)  # held: the clean latent, untouched

    request = Request("a", width=96, height=64, frames=9, steps=2, seed=4, video_guidance=guidance[0],
                      audio=sound)  # the audio guidance left to the pipeline's rule
    want, _ = sample_request(request, _models(model, encoder), conditioning.positive, conditioning.negative)
    torch.testing.assert_close(out.video, want.video, atol=1e-6, rtol=0)
    assert torch.equal(want.sound.samples, out.sound.samples)

    images, audio, fps = node("LTX2Decode", model, out, 0, 0)
    assert images.shape == (9, 64, 96, 3) and fps == 24.0
    assert audio["sample_rate"] == rate and audio["waveform"].shape == (1, channels, clip.shape[1])
    assert audio["waveform"].dtype == torch.float32 and torch.equal(audio["waveform"][0], clip)


def test_a_sound_not_held_exactly_is_sampled_and_decoded(loaded):
    """Strength < 1 lets the model change the sound: the latent carries none and the decoder decodes the audio."""
    model, _, conditioning, guidance = loaded
    sound, _ = node("LTX2AudioCondition", _comfy(_tone(1.0, 16000), 16000), 0.0, 0.0, 0.5, 24.0)
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    (out,) = node("LTX2Sampler", model, conditioning, latent, 4, 2, "ltx2", guidance=guidance, audio=sound)
    assert out.sound is None
    _, audio, _ = node("LTX2Decode", model, out, 0, 0)
    assert audio["sample_rate"] == 24000 and audio["waveform"].shape[:2] == (1, 2)


def test_a_refine_stage_without_the_sound_drops_it(loaded):
    """A latent that carries a sound keeps it only through samplers that hold it exactly."""
    model, _, conditioning, _ = loaded
    sound, _ = node("LTX2AudioCondition", _comfy(_tone(1.0, 16000), 16000), 0.0, 0.0, 1.0, 24.0)
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    (held,) = node("LTX2Sampler", model, conditioning, latent, 4, 1, "ltx2", audio=sound)
    (kept,) = node("LTX2Sampler", model, conditioning, held, 4, 3, "stage-2 refine", audio=sound)
    (refined,) = node("LTX2Sampler", model, conditioning, held, 4, 3, "stage-2 refine")
    assert torch.equal(kept.sound.samples, held.sound.samples) and refined.sound is None


def test_the_generate_node_writes_the_sound_it_was_given(loaded):
    model, encoder, _, _ = loaded
    samples = _tone(0.5, 22050, 1)
    sound, frames = node("LTX2AudioCondition", _comfy(samples, 22050), 0.0, 0.0, 1.0, 24.0)
    images, audio, fps = node("LTX2Generate", model, encoder, "a singer", negative_prompt="blurry", mode="one-stage",
                              width=96, height=64, frames=frames, fps=24.0, seed=1, steps=2, audio=sound)
    assert images.shape == (frames, 64, 96, 3) and audio["sample_rate"] == 22050
    assert torch.equal(audio["waveform"][0], samples[:, :round(frames / 24 * 22050)])


def test_sampler_and_generate_refuse_a_short_sound_and_a_model_without_the_encoder(loaded):
    model, encoder, conditioning, _ = loaded
    short, _ = node("LTX2AudioCondition", _comfy(_tone(0.2, 16000), 16000), 0.0, 0.0, 1.0, 24.0)
    sound, _ = node("LTX2AudioCondition", _comfy(_tone(1.0, 16000), 16000), 0.0, 0.0, 1.0, 24.0)
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    clip_needs = r"lasts 0.200 s; from 0 s the clip needs 0.375 s; use a longer sound.*or fewer frames"
    with pytest.raises(ValueError, match=clip_needs):
        node("LTX2Sampler", model, conditioning, latent, 4, 2, "ltx2", audio=short)
    with pytest.raises(ValueError, match=clip_needs):
        node("LTX2Generate", model, encoder, "a", negative_prompt="", mode="one-stage", width=96, height=64,
             frames=9, fps=24.0, seed=1, steps=2, audio=short)
    bare = model._replace(audio_encoder=None)
    with pytest.raises(ValueError, match="needs the audio VAE encoder.*load a released LTX-2 checkpoint"):
        node("LTX2Sampler", bare, conditioning, latent, 4, 2, "ltx2", audio=sound)
    with pytest.raises(ValueError, match="needs the audio VAE encoder"):
        node("LTX2Generate", bare, encoder, "a", negative_prompt="", mode="one-stage", width=96, height=64,
             frames=9, fps=24.0, seed=1, steps=2, audio=sound)


def test_the_loader_fills_the_handles_audio_encoder_and_releases_it(files):
    (model,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", unique_id="audio-encoder-test")
    assert model.audio_encoder is not None and model.audio_encoder in model.modules()
    model.release()
    assert all(p.is_meta for p in model.audio_encoder.parameters())


def test_a_held_sound_is_an_encoded_audio_condition_of_the_stage(loaded, monkeypatch):
    """The sampler hands the stage the encoded sound at the node's strength, after the images."""
    import nodes.sampling as sampling

    model, _, conditioning, _ = loaded
    seen = {}
    real = sampling.build_stage

    def spy(version, parts, *args):
        seen["conditions"] = parts.conditions
        return real(version, parts, *args)

    monkeypatch.setattr(sampling, "build_stage", spy)
    sound, _ = node("LTX2AudioCondition", _comfy(_tone(1.0, 16000), 16000), 0.0, 0.0, 0.7, 24.0)
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    node("LTX2Sampler", model, conditioning, latent, 4, 1, "ltx2", audio=sound)
    (held,) = seen["conditions"]
    assert isinstance(held, EncodedAudio) and held.strength == 0.7 and held.latent.shape[2] == latent.audio.shape[2]
    assert isinstance(sound.audio, Waveform)


def test_the_generate_node_makes_sound_alone_with_audio_only(loaded):
    """Text to audio: no frames, the decoded stereo at the vocoder's rate for frames / fps seconds."""
    model, encoder, _, _ = loaded
    images, audio, fps = node("LTX2Generate", model, encoder, "rain on a tin roof", negative_prompt="noise",
                              mode="one-stage", width=96, height=64, frames=25, fps=24.0, seed=3, steps=2,
                              audio_only=True)
    assert images is None and fps == 24.0
    waveform = audio["waveform"]
    assert waveform.shape[:2] == (1, 2) and abs(waveform.shape[2] / audio["sample_rate"] - 25 / 24) < 0.05
    assert waveform.abs().max() > 0  # a sound was made
    sound, _ = node("LTX2AudioCondition", _comfy(_tone(2.0, 16000), 16000), 0.0, 0.0, 1.0, 24.0)
    for bad, match in [({"mode": "two-stage"}, "runs one stage"), ({"audio": sound}, "an input sound was given")]:
        settings = {"mode": "one-stage", "width": 128, "height": 64, "frames": 9, "fps": 24.0, "seed": 1,
                    "steps": 1, "audio_only": True} | bad
        with pytest.raises(ValueError, match=match):
            node("LTX2Generate", model, encoder, "a", negative_prompt="", **settings)
