"""Dub-It (`ltx2_core.conditioning.dub`) through the request and the command line, on real mp4s made with PyAV: the
clip decides frames (floored to 8k+1) and fps, its whole sound is the reference; every bad clip, flag or LoRA is
refused (exit 2 on the command line) before any model work. Parity with 1.2.0's DubItPipeline:
tests/parity/test_dubit_parity.py."""

from __future__ import annotations

import av
import pytest
from support.model_files import write_lora, write_upsampler
from unit.test_video_to_audio import write_video

from ltx2_core.__main__ import main
from ltx2_core.conditioning import Dub
from ltx2_core.conditioning.dub import dub_frames
from ltx2_core.errors import SettingError
from ltx2_core.request import Request


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dub")
    return {"loud": write_video(folder / "loud.mp4", width=96, height=64, frames=11, sound=True),
            "silent": write_video(folder / "silent.mp4", frames=11),
            "short": write_video(folder / "short.mp4", frames=8, sound=True)}


def _request(clip, **settings) -> Request:
    dub = Dub(clip)
    info = dub.info()
    return Request("a man speaks", **{"width": 128, "height": 64, "frames": info.frames, "fps": info.fps,
                                      "mode": "distilled", "dub": dub} | settings)


def test_the_clip_decides_frames_and_fps(clips):
    assert [dub_frames(n) for n in (9, 11, 16, 17, 120, 121)] == [9, 9, 9, 17, 113, 121]
    info = Dub(clips["loud"]).info()
    assert (info.frames, info.fps, info.has_sound) == (9, 24.0, True)
    _request(clips["loud"]).check()
    sound = Dub(clips["loud"]).read_sound()
    assert sound.seconds >= 9 / 24  # the whole track (the reference reads it whole), at least the clip


@pytest.mark.parametrize("clip, settings, match", [
    ("silent", {}, "has no audio stream; Dub-It re-voices the clip's own sound"),
    ("short", {"frames": 9}, "Dub-It needs at least 9 frames"),
    ("loud", {"mode": "two-stage"}, "set mode distilled"),
    ("loud", {"frames": 17}, "generate at the clip's frames and fps"),
    ("loud", {"width": 96}, "multiples of 64"),
])
def test_a_clip_or_setting_it_cannot_serve_is_refused(clips, clip, settings, match):
    with pytest.raises(ValueError, match=match):
        _request(clips[clip], **settings).check()


def test_a_sound_shorter_than_the_clip_is_refused(clips):
    from ltx2_core.audio_io import Waveform
    import torch

    from ltx2_core.video_io import VideoFrames

    frames = VideoFrames(torch.rand(9, 64, 64, 3), 24.0)
    dub = Dub(frames, sound=Waveform(torch.zeros(2, 4000), 16000))
    with pytest.raises(SettingError, match=r"the sound covers 0.250 s of the clip's 0.375 s"):
        dub.check(((32, 64), (64, 128)))
    with pytest.raises(SettingError, match="connect the clip's AUDIO"):
        Dub(frames).check(((32, 64), (64, 128)))


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_checkpoints, gemma_files):
    folder = tmp_path_factory.mktemp("dub_files")
    return {"checkpoint": str(tiny_checkpoints["2.0"]), "gemma": str(gemma_files[0]),
            "upsampler": str(write_upsampler(folder / "up.safetensors")),
            "ic": str(write_lora(folder / "dub-it.safetensors", 3, metadata={"reference_downscale_factor": "1"})),
            "plain": str(write_lora(folder / "style.safetensors", 4))}


def _flags(files, tmp_path, lora="ic"):
    return ["generate", "--checkpoint", files["checkpoint"], "--text-encoder", files["gemma"], "--upsampler",
            files["upsampler"], "--lora", files[lora], "--width", "128", "--height", "64", "--prompt", "a man speaks",
            "--output", str(tmp_path / "out.mp4")]


def test_the_command_line_writes_the_dubbed_clip(clips, files, tmp_path, capsys):
    assert main([*_flags(files, tmp_path), "--dub", str(clips["loud"]), "0.9"]) == 0, capsys.readouterr().err
    assert f"wrote {tmp_path / 'out.mp4'}: 9 frames 128x64 at 24 fps" in capsys.readouterr().out
    with av.open(str(tmp_path / "out.mp4")) as container:
        assert container.streams.video[0].frames == 9 and container.streams.audio[0].channels == 2


@pytest.mark.parametrize("extra, lora, match", [
    (["--dub", "{loud}", "1", "2"], "ic", "--dub takes CLIP [STRENGTH]"),
    (["--dub", "{loud}", "loud"], "ic", "--dub STRENGTH must be a number"),
    (["--dub", "{loud}"], "plain", "--dub needs the Dub-It IC-LoRA"),
    (["--dub", "{loud}", "--mode", "two-stage"], "ic", "drop --mode two-stage"),
    (["--dub", "{loud}", "--frames", "17"], "ic", "--frames 17 differs from the clip's 9"),
    (["--dub", "{silent}"], "ic", "has no audio stream"),
    (["--dub", "{loud}", "--control", "{loud}"], "ic", "drop --control"),
])
def test_bad_input_exits_2_before_model_work(clips, files, tmp_path, capsys, extra, lora, match):
    argv = [a.format(**{k: str(v) for k, v in clips.items()}) for a in extra]
    assert main([*_flags(files, tmp_path, lora), *argv]) == 2
    assert match in capsys.readouterr().err


def test_the_memory_plan_counts_the_audio_encoder_and_both_reference_kinds(clips):
    """A Dub-It request's job: the clip's frames for the video encoder, its control tokens at stage 2's size (the
    larger; stage 2 holds it too) and its sound (audio encoder, appended audio tokens)."""
    from ltx2_core.memory.footprint import ModelSizes, request_memory
    from ltx2_core.model.transformer.config import TransformerConfig
    from ltx2_core.pipeline import request_job
    from ltx2_core.geometry import video_tokens

    config = TransformerConfig.tiny("2.0")
    request = _request(clips["loud"])
    job = request_job(request, config)
    assert job.two_stage and job.video_frames == 9 and job.guide_tokens == video_tokens(9, 64, 128)
    assert job.reference_seconds == pytest.approx(9 / 24)
    plain = job._replace(video_frames=0, guide_tokens=0, reference_seconds=0.0)
    parts = {stage: {p.name: p.bytes for p in ps} for stage, ps in request_memory(job, ModelSizes(config)).stages}
    less = {stage: {p.name: p.bytes for p in ps} for stage, ps in request_memory(plain, ModelSizes(config)).stages}
    assert parts["encoding"]["the audio encoder's activations"] > 0 and "the reference sound" in parts["encoding"]
    assert "the audio encoder's activations" not in less["encoding"]
    for name in ("the sampling state", next(n for n in parts["sampling"] if n.startswith("activations"))):
        assert parts["sampling"][name] > less["sampling"][name]
