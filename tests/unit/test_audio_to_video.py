"""Audio-to-video through the pipeline and the command line: the sound is read for the clip from its start, held in
every stage, and the clip's own samples (never a re-decoded copy) reach the mp4 writer; a request the sound cannot
serve is refused before any model work."""

from __future__ import annotations

from dataclasses import replace

import av
import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_core import media
from ltx2_core.__main__ import main
from ltx2_core.audio_io import Waveform, read_audio
from ltx2_core.conditioning import AudioCondition, ImageCondition
from ltx2_core.demo.models import demo_models
from ltx2_core.model_files import ModelFiles
from ltx2_core.pipeline import Request, generate

RATE = 44100


def write_wav(path, seconds: float = 2.0, rate: int = RATE, channels: int = 2, seed: int = 0):
    """A real 16-bit PCM wav (PyAV): a chirp plus a little noise on each channel."""
    t = np.arange(round(seconds * rate)) / rate
    noise = np.random.default_rng(seed).normal(0, 0.02, (channels, t.size))
    samples = (0.4 * np.sin(2 * np.pi * (220 + 300 * t) * t))[None] + noise
    pcm = (np.clip(samples, -1, 1) * 32767).astype(np.int16)
    layout = "stereo" if channels == 2 else "mono"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=rate, layout=layout)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm.T.reshape(1, -1)), format="s16", layout=layout)
        frame.sample_rate = rate
        for packet in (*stream.encode(frame), *stream.encode(None)):
            container.mux(packet)
    return path


@pytest.fixture(scope="module")
def models():
    return demo_models("2.3")


def _request(audio, **settings):
    return Request("a woman sings", **{"width": 64, "height": 64, "frames": 17, "steps": 2, "audio": audio} | settings)


@pytest.mark.parametrize("mode", ["one-stage", "two-stage", "distilled"])
def test_the_clip_of_the_file_reaches_the_mp4_writer_sample_for_sample(models, mode, tmp_path, monkeypatch):
    wav = write_wav(tmp_path / "voice.wav")
    handed = {}
    real_write = media.write_mp4

    def spy(path, frames, fps, audio=None, sample_rate=None, **kw):
        handed.update(audio=audio.clone(), rate=sample_rate)
        return real_write(path, frames, fps, audio, sample_rate, **kw)

    monkeypatch.setattr("ltx2_core.stages.write_mp4", spy)
    request = _request(AudioCondition(wav, start=0.4), mode=mode, width=128 if mode != "one-stage" else 64,
                       steps=None if mode == "distilled" else 2)
    result = generate(request, models)
    path = result.save(tmp_path / "out.mp4")
    whole = read_audio(wav)
    first, count = round(0.4 * RATE), round(17 / 24 * RATE)
    # a pure copy of the decoded file's samples over [start, start + clip): exact
    assert handed["rate"] == RATE and torch.equal(handed["audio"], whole.samples[:, first:first + count])
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        written = np.concatenate([f.to_ndarray() for f in container.decode(stream)], axis=-1)
    assert stream.rate == RATE and stream.channels == 2
    assert abs(written.shape[-1] - count) <= 2048  # AAC pads the last frame and primes the encoder


def test_a_waveform_in_memory_and_a_mono_sound(models):
    mono = Waveform(torch.linspace(-0.5, 0.5, RATE * 2)[None], RATE)
    result = generate(_request(AudioCondition(mono, start=1.0)), models)
    count = round(17 / 24 * RATE)
    assert result.sample_rate == RATE and torch.equal(result.waveform, mono.samples[:, RATE:RATE + count])


def test_image_and_audio_together(models, tmp_path):
    """A talking portrait: a face at frame 0 and a voice; both conditions act."""
    wav = write_wav(tmp_path / "voice.wav")
    face = np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    result = generate(_request(AudioCondition(wav), images=(ImageCondition(face, 0, 1.0, 0),)), models)
    alone = generate(_request(AudioCondition(wav)), models)
    assert (result.frames - alone.frames).abs().max() > 0.01
    assert torch.equal(result.waveform, alone.waveform)


def test_partial_strength_decodes_the_sampled_audio(models, tmp_path):
    wav = write_wav(tmp_path / "voice.wav")
    result = generate(_request(AudioCondition(wav, strength=0.5)), models)
    assert result.sample_rate == 48000  # the vocoder's: the audio was sampled, so it is decoded


def test_the_sound_steers_the_video(models, tmp_path):
    one = generate(_request(AudioCondition(write_wav(tmp_path / "a.wav", seed=1))), models)
    other = generate(_request(AudioCondition(write_wav(tmp_path / "b.wav", channels=1, seed=2))), models)
    assert (one.frames - other.frames).abs().max() > 1e-3


@pytest.mark.parametrize("change, match", [
    ({"strength": 1.5}, r"strength must be in \[0, 1\]"),
    ({"strength": float("nan")}, r"strength must be in \[0, 1\]"),
    ({"start": -1.0}, "start must be a time in seconds ≥ 0"),
    ({"start": 1.9}, r"lasts 2\.000 s; from 1\.9 s the clip needs 0\.708 s"),
])
def test_bad_settings_are_refused_before_model_work(models, tmp_path, change, match):
    audio = replace_audio(AudioCondition(write_wav(tmp_path / "voice.wav")), **change)
    with pytest.raises(ValueError, match=match):
        _request(audio).check()


def replace_audio(condition: AudioCondition, **change) -> AudioCondition:
    return condition._replace(**change)


def test_a_sound_above_full_scale_is_refused_before_model_work():
    loud = Waveform(torch.linspace(-1.5, 1.5, RATE), RATE)
    with pytest.raises(ValueError, match="peaks at 1.500 over the clip, above full scale"):
        _request(AudioCondition(loud._replace(samples=loud.samples[None]))).check()


def test_a_model_without_audio_encoder_is_refused(models, tmp_path):
    wav = write_wav(tmp_path / "voice.wav")
    with pytest.raises(ValueError, match="audio conditioning needs the audio VAE encoder"):
        generate(_request(AudioCondition(wav)), models._replace(audio_encoder=None))
    with pytest.raises(ValueError, match="audio must be an AudioCondition"):
        replace(_request(None), audio=str(wav)).check()


def test_a_checkpoint_without_the_encoder_loads_and_the_command_line_refuses_audio(tiny_checkpoints, tmp_path,
                                                                                   gemma_files, capsys):
    with safe_open(str(tiny_checkpoints["2.3"]), "pt") as file:
        tensors = {k: file.get_tensor(k) for k in file.keys() if not k.startswith("audio_vae.encoder.")}
        metadata = file.metadata()
    stripped = tmp_path / "stripped.safetensors"
    save_file(tensors, str(stripped), metadata=metadata)
    files = ModelFiles(str(stripped), str(gemma_files[0]))
    assert not files.has_audio_encoder() and ModelFiles(str(tiny_checkpoints["2.3"])).has_audio_encoder()
    wav = write_wav(tmp_path / "voice.wav")
    code = main(["--checkpoint", str(stripped), "--text-encoder", str(gemma_files[0]), "--audio", str(wav),
                 "--width", "64", "--height", "64", "--frames", "9", "--output", str(tmp_path / "x.mp4")])
    assert code == 2 and "--audio needs the audio VAE encoder" in capsys.readouterr().err
    assert not (tmp_path / "x.mp4").exists()


def test_the_command_line_writes_audio_to_video(tmp_path, capsys):
    wav = write_wav(tmp_path / "a:b.wav", seconds=3.0)  # a colon in the path: settings are read from the right
    output = tmp_path / "out.mp4"
    assert main(["--audio", f"{wav}:1.25:1", "--frames", "17", "--steps", "2", "--output", str(output)]) == 0
    assert "of the input sound at 44100 Hz" in capsys.readouterr().out
    with av.open(str(output)) as container:
        assert container.streams.audio[0].rate == RATE and container.streams.video[0].frames == 17


@pytest.mark.parametrize("value, match", [
    ("voice.wav:1.2.3", "START must be a time in seconds"),
])
def test_the_command_line_refuses_a_malformed_audio_argument(value, match, capsys):
    with pytest.raises(SystemExit):
        main(["--audio", value])
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("settings, rate, match", [
    ("", RATE, "the clip needs 0.708 s"), (":0:2", RATE, "strength must be in [0, 1]"),
    (":0", 44000, "sample rate 44000 Hz is not one an mp4's AAC can carry"),
])
def test_the_command_line_refuses_a_bad_sound_before_model_work(tmp_path, capsys, settings, rate, match):
    wav = write_wav(tmp_path / "short.wav", seconds=0.5 if rate == RATE else 2.0, rate=rate)
    assert main(["--audio", f"{wav}{settings}", "--frames", "17", "--output", str(tmp_path / "x.mp4")]) == 2
    captured = capsys.readouterr()
    assert match in captured.err and "loaded in" not in captured.out and not (tmp_path / "x.mp4").exists()


def _bad_sound(kind: str, tmp_path):
    """Each bad input of the issue as a real file (tests/unit/test_audio_io.py makes them)."""
    from unit.test_audio_io import _sine, _video, _wav, _write

    if kind == "missing":
        return tmp_path / "nowhere.wav"
    if kind == "corrupt":
        path = tmp_path / "noise.mp3"
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
        return path
    if kind == "silent video":
        return _video(tmp_path, audio=False)
    if kind == "six channels":
        return _wav(tmp_path, channels=6, name="surround.wav")[0]
    if kind == "empty":
        path = tmp_path / "empty.wav"
        container = av.open(str(path), "w")
        container.add_stream("pcm_s16le", rate=8000, layout="mono")
        container.start_encoding()
        container.close()
        return path
    samples = _sine(1, seconds=2.0)
    samples[0, 100] = np.nan
    return _write(tmp_path / "nan.wav", samples, "pcm_f32le", "flt")


@pytest.mark.parametrize("kind, match", [
    ("missing", "does not exist; check the path"), ("corrupt", "noise.mp3"), ("silent video", "has no audio stream"),
    ("six channels", "downmix it first"), ("empty", "holds no audio samples"), ("nan", "NaN"),
])
def test_every_bad_sound_exits_2_before_model_work(kind, match, tmp_path, capsys):
    sound = _bad_sound(kind, tmp_path)
    assert main(["--audio", str(sound), "--frames", "9", "--output", str(tmp_path / "x.mp4")]) == 2
    captured = capsys.readouterr()
    assert match in captured.err, captured.err
    assert "loaded in" not in captured.out and not (tmp_path / "x.mp4").exists()
