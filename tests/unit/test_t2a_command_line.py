"""`python -m ltx2_core --audio-only`: text to audio writes the sound alone as .wav (16-bit PCM, the reference's
format), .flac, .m4a or .mp4, as long as the clip; bad combinations exit 2 before any model work."""

from __future__ import annotations

import av
import pytest

from ltx2_core.__main__ import main


@pytest.mark.parametrize("suffix, codec", [(".wav", "pcm_s16le"), (".flac", "flac"), (".m4a", "aac"), (".mp4", "aac")])
def test_text_to_audio_writes_the_sound_alone(tmp_path, capsys, suffix, codec):
    output = tmp_path / f"sound{suffix}"
    assert main(["--audio-only", "--version", "2.3", "--frames", "25", "--steps", "2", "--output", str(output),
                 "--no-progress"]) == 0
    assert "text to audio, 1.04 s" in capsys.readouterr().out
    with av.open(str(output)) as container:
        assert not container.streams.video
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        assert (stream.codec_context.name, stream.rate, stream.channels) == (codec, 48000, 2)
    assert abs(samples / 48000 - 25 / 24) < 0.1  # the sound covers the clip's duration


def test_the_default_output_of_text_to_audio_is_a_wav(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--audio-only", "--frames", "9", "--steps", "1", "--no-progress"]) == 0
    assert (tmp_path / "ltx2_output.wav").is_file() and not (tmp_path / "ltx2_output.mp4").exists()


@pytest.mark.parametrize("extra, match", [
    (["--output", "x.avi"], "give --output a .wav, .flac, .m4a, .mp4 name"),
    (["--mode", "two-stage"], "runs one stage, got mode two-stage"),
    (["--image", "face.png"], "no video to hold images in"),
    (["--audio", "voice.wav"], "an input sound was given too"),
    (["--cfg-parallel", "2"], "text to audio runs on one GPU"),
    (["--frames", "10"], "8k+1"),
])
def test_bad_text_to_audio_requests_exit_2_before_model_work(extra, match, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--audio-only", *extra]) == 2
    captured = capsys.readouterr()
    assert match in captured.err and "loaded in" not in captured.out
    assert not list(tmp_path.iterdir())
