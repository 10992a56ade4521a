"""`python -m ltx2_core generate`: the demo writes a playable mp4 with audio of the requested length for every
mode, runs from real files (checkpoint, ComfyUI text encoder, upsampler, LoRAs), and refuses bad requests before
any model work."""

from __future__ import annotations


import av
import pytest
from PIL import Image

import ltx2_core.model_files as model_files
from ltx2_core.__main__ import main
from support.model_files import write_lora, write_upsampler


def _probe(path):
    with av.open(str(path)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(audio))
        return video.frames, video.average_rate, video.width, video.height, audio.rate, audio.channels, samples


@pytest.mark.parametrize("mode, version, size, frames, fps", [
    ("one-stage", "2.0", (96, 64), 25, 24),
    ("one-stage", "2.3", (64, 96), 9, 24),
    ("two-stage", "2.0", (128, 64), 17, 25),
    ("two-stage", "2.3", (64, 128), 9, 24),
    ("distilled", "2.3", (128, 128), 17, 24),
    ("one-stage", "2.5", (64, 64), 9, 24),
    ("distilled", "2.5", (64, 128), 9, 24),
    ("two-stage-hq", "2.5", (64, 64), 9, 24),
])
def test_demo_writes_a_playable_mp4_with_audio_of_the_requested_length(mode, version, size, frames, fps, tmp_path,
                                                                       capsys):
    output = tmp_path / "out.mp4"
    args = ["generate", "--mode", mode, "--version", version, "--width", str(size[0]), "--height", str(size[1]),
            "--frames", str(frames), "--fps", str(fps), "--output", str(output)]
    args += [] if mode == "distilled" else ["--steps", "2"]
    args += ["--passes-per-forward", "2"] if version == "2.3" and mode == "one-stage" else []
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "DEMO model" in captured.out
    stages = ["stage 1", "stage 2"] if mode != "one-stage" else ["denoise"]
    assert all(f"{stage}: 100%" in captured.err for stage in stages)
    count, rate, width, height, sample_rate, channels, samples = _probe(output)
    assert (count, rate, width, height, channels) == (frames, fps, *size, 2)
    assert sample_rate == (24000 if version == "2.0" else 48000)
    assert abs(samples / sample_rate - frames / fps) < 0.1  # the audio covers the clip


BAD = [
    (["--frames", "16"], "8k+1"),
    (["--width", "100"], "multiples of 32"),
    (["--mode", "two-stage", "--width", "96"], "multiples of 64"),
    (["--steps", "0"], "steps must be an integer ≥ 1"),
    (["--cfg", "-2"], "must be ≥ 0"),
    (["--audio-rescale", "-0.5"], "must be ≥ 0"),
    (["--stg-blocks", "7"], "outside this model's blocks 0..2"),
    (["--mode", "distilled", "--steps", "4"], "fixed 8-step schedule"),
    (["--mode", "distilled", "--sampler", "res_2s"], "set sampler to euler"),
    (["--sampler", "res_2s", "--cache", "easycache"], "run it without the cache"),
    (["--mode", "two-stage-hq", "--cuda-graphs", "on"], "drop --cuda-graphs on"),
    (["--mode", "two-stage-hq", "--width", "96"], "multiples of 64"),
    (["--prompt", "  "], "prompt is empty"),
    (["--checkpoint", "{tmp}/missing.safetensors", "--text-encoder", "{tmp}"], "no such file"),
    (["--checkpoint", "{ckpt}"], "needs --text-encoder"),
    (["--checkpoint", "{ckpt}", "--text-encoder", "{tmp}", "--mode", "two-stage"], "needs --upsampler"),
    (["--checkpoint", "{ckpt}", "--text-encoder", "{ckpt}", "--lora", "{tmp}/missing.safetensors:0.5"], "no such file"),
    (["--checkpoint", "{tmp}", "--text-encoder", "{ckpt}"], "--checkpoint {tmp} is a directory"),
    (["--checkpoint", "{ckpt}", "--text-encoder", "{tmp}"], "--text-encoder {tmp} is a directory without config.json"),
    (["--checkpoint", "{ckpt}", "--text-encoder", "{ckpt}", "--mode", "distilled", "--upsampler", "{tmp}"],
     "--upsampler {tmp} is a directory"),
    (["--checkpoint", "{ckpt}", "--text-encoder", "{ckpt}", "--lora", "{tmp}:0.5"], "--lora {tmp} is a directory"),
    (["--lora", "{tmp}/x.safetensors"], "needs --checkpoint"),
    (["--output", "{tmp}/no/such/folder/x.mp4"], "does not exist"),
    (["--cuda-graphs", "--device", "cpu"], "CUDA options"),
    (["--sp", "3"], "needs 3 ranks, but 1 was started"),
    (["--cfg-parallel", "2", "--mode", "distilled"], "cfg 2 exceeds the 1 guidance passes"),
    (["--memory-budget", "0.00001"], "on 10.0 KB budget (9.2 KB usable); 9.2 KB is left, with every block"),
    (["--image", "{tmp}/missing.png"], "missing.png: no such file"),
    (["--image", "{tmp}/cat.png:200"], "pixel frame index in 0..16"),
    (["--image", "{tmp}/cat.png:0:1.5"], "strength must be in [0, 1]"),
    (["--image", "{tmp}/notes.png"], "is not an image PIL can read"),
    (["--memory-budget", "-1"], "--memory-budget must be a positive number"),
]


@pytest.mark.parametrize("flags, message", BAD, ids=[m for _, m in BAD])
def test_bad_requests_fail_before_any_model_work(flags, message, tmp_path, tiny_checkpoints, capsys, monkeypatch):
    def no_model_work(*args, **kwargs):
        raise AssertionError("models were loaded for a bad request")

    monkeypatch.setattr("ltx2_core.demo.demo_models", no_model_work)
    monkeypatch.setattr(model_files, "load_transformer", no_model_work)
    flags = [f.format(tmp=tmp_path, ckpt=tiny_checkpoints["2.0"]) for f in flags]
    Image.new("RGB", (40, 30)).save(tmp_path / "cat.png")
    (tmp_path / "notes.png").write_text("not an image")
    assert main(["generate", "--output", str(tmp_path / "x.mp4"), *flags]) == 2
    captured = capsys.readouterr()
    assert message.format(tmp=tmp_path) in captured.err and "model:" not in captured.out
    assert list(tmp_path.glob("*.mp4")) == []


def test_two_stage_from_files(capsys, gemma_files, tiny_checkpoints, tmp_path):
    """Every component from files: DiT + a user LoRA, Gemma + connectors, VAEs, vocoder, upsampler, distilled LoRA."""
    output = tmp_path / "out.mp4"
    args = ["generate", "--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]),
            "--upsampler", str(write_upsampler(tmp_path / "up.safetensors")),
            "--distilled-lora", str(write_lora(tmp_path / "distilled.safetensors", 1)),
            "--lora", f"{write_lora(tmp_path / 'style.safetensors', 2)}:0.5", "--mode", "two-stage",
            "--width", "128", "--height", "64", "--frames", "9", "--steps", "2", "--stg-blocks", "1",
            "--audio-stg-blocks", "1", "--output", str(output), "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err
    assert f"wrote {output}" in capsys.readouterr().out
    assert _probe(output)[:4] == (9, 24, 128, 64)


def test_a_memory_budget_streams_blocks_with_the_output_of_the_resident_run(tmp_path, capsys):
    """A budget that leaves room for no resident block: every block streams, the tensors equal the resident run's."""
    from safetensors.torch import load_file

    from ltx2_core import TransformerConfig
    from ltx2_core.memory.plan import HEADROOM, activation_bytes, transformer_weight_bytes

    import torch

    config = TransformerConfig.tiny("2.0")
    weights = transformer_weight_bytes(config, torch.float32)
    need = weights.non_block + 2.5 * weights.per_block + activation_bytes(config, 9, 64, 96, 4, torch.float32)
    common = ["generate", "--prompt", "a red car", "--width", "96", "--height", "64", "--frames", "9", "--steps", "2"]
    runs = {}
    for name, flags in (("streamed", ["--memory-budget", f"{need / HEADROOM / 1e9:.9f}"]),
                        ("resident", ["--memory", "resident"])):
        assert main([*common, *flags, "--output", str(tmp_path / f"{name}.mp4"),
                     "--tensors", str(tmp_path / f"{name}.safetensors")]) == 0
        runs[name] = load_file(str(tmp_path / f"{name}.safetensors"))
    assert "0/3 blocks resident" in capsys.readouterr().out
    torch.testing.assert_close(runs["streamed"]["frames"], runs["resident"]["frames"], atol=1e-5, rtol=0)


def test_image_to_video_and_a_last_frame_keyframe_from_the_command_line(tmp_path):
    """--image PATH (frame 0, strength 1) and PATH:16:0.9:0 (the last frame, no H.264 round trip): an mp4."""
    import numpy as np

    pixels = (np.arange(60 * 80 * 3) % 253).astype(np.uint8).reshape(60, 80, 3)
    Image.fromarray(pixels).save(tmp_path / "first.png")
    Image.fromarray(pixels[::-1].copy()).save(tmp_path / "last.png")
    out = tmp_path / "i2v.mp4"
    assert main(["generate", "--prompt", "a cat", "--width", "96", "--height", "64", "--frames", "17", "--steps", "2",
                 "--image", str(tmp_path / "first.png"), "--image", f"{tmp_path / 'last.png'}:16:0.9:0",
                 "--output", str(out)]) == 0
    assert _probe(out)[:4] == (17, 24, 96, 64)
