"""`--frames auto` (and `--auto-duration MIN MAX`) on the command line: the length predicted by LTX-2.5's duration
head from the prompt before the memory plan, printed with the head's seconds, for text to audio and a video mode, on
the tiny 2.5 release (its head predicts about 0.9 s: 17 frames at 24 fps); bad combinations exit 2 before any model
work, naming the fix."""

from __future__ import annotations

import av
import pytest
from support.release25 import write_release25

from ltx2_core.__main__ import main


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_release25(tmp_path_factory.mktemp("release") / "models")


def _model(release) -> list[str]:
    return ["--checkpoint", str(release["dev"].parent.parent), "--vae", str(release["conv_vae"])]  # the fast decoder


def test_text_to_audio_takes_the_predicted_length(release, tmp_path, capsys):
    output = tmp_path / "sound.wav"
    assert main([*_model(release), "--audio-only", "--frames", "auto", "--auto-duration", "0.3", "2", "--steps", "1",
                 "--dtype", "float32", "--output", str(output), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "duration head: 0.9" in out and "-> 17 frames (0.71 s at 24 fps; bounds 0.3..2 s)" in out
    assert "text to audio, 0.71 s" in out
    with av.open(str(output)) as container:
        samples = sum(frame.samples for frame in container.decode(container.streams.audio[0]))
    assert abs(samples / 48000 - 17 / 24) < 0.05


def test_a_video_mode_takes_it_from_auto_duration_alone(release, tmp_path, capsys):
    output = tmp_path / "clip.mp4"
    assert main([*_model(release), "--auto-duration", "0.3", "2", "--width", "64", "--height", "64", "--steps", "1",
                 "--dtype", "float32", "--output", str(output), "--no-progress"]) == 0
    assert "one-stage, 64x64, 17 frames at 24 fps" in capsys.readouterr().out
    with av.open(str(output)) as container:
        assert container.streams.video[0].frames == 17


@pytest.mark.parametrize("extra, match", [
    (["--version", "2.3"], "LTX-2.3 has no duration head: give a frame count"),
    (["--version", "2.5"], "the model's files have no duration head"),
    (["--video", "clip.mp4"], "the clip's length comes from the file; drop --frames auto"),
    (["--auto-duration", "3", "1"], "0 < min ≤ max seconds"),
    (["--duration", "5"], "--duration makes a long clip"),
])
def test_bad_automatic_lengths_exit_2_before_model_work(extra, match, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--frames", "auto", *extra]) == 2
    captured = capsys.readouterr()
    assert match in captured.err and "loaded in" not in captured.out and "duration head:" not in captured.out
    assert not list(tmp_path.iterdir())


def test_a_frame_count_with_bounds_and_25_files_without_a_head_are_refused(release, tmp_path, capsys):
    assert main(["--frames", "25", "--auto-duration", "1", "2"]) == 2
    assert "drop one of them (--frames auto predicts it)" in capsys.readouterr().err
    no_head = ["--checkpoint", str(release["dev"]), "--text-encoder", str(release["text_encoder"]), "--vae",
               str(release["vae"]), "--audio-vae", str(release["audio_vae"])]
    assert main([*no_head, "--audio-only", "--frames", "auto", "--output", str(tmp_path / "x.wav")]) == 2
    assert "--duration-head FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--frames", "many"])
    assert "must be a frame count (8k+1, e.g. 121) or auto" in capsys.readouterr().err
