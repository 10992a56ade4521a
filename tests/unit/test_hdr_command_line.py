"""`python -m ltx2_core generate --hdr VIDEO [STRENGTH]`: a tiny run writing frame_00000.exr ... and preview.mp4
into --output (the size the video's unless given, any size of at least 64, cropped back), and the refusals, each
before any model loads, naming the fix: no HDR IC-LoRA among --lora (none, or one without the metadata), a bad
--hdr value, flags HDR cannot take, a size under 64, OpenEXR missing, --output a file."""

from __future__ import annotations

import builtins

import pytest
import torch
from support.model_files import write_lora, write_upsampler

from ltx2_core.__main__ import main
from ltx2_core.exr import read_exr
from ltx2_core.media import write_mp4


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_checkpoints, gemma_files):
    folder = tmp_path_factory.mktemp("hdr_cli")
    video = write_mp4(folder / "sdr.mp4", torch.rand(9, 64, 96, 3, generator=torch.Generator().manual_seed(2)), 24)
    flags = ["--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]),
             "--upsampler", str(write_upsampler(folder / "up.safetensors")), "--no-progress"]
    hdr = write_lora(folder / "hdr.safetensors", seed=2, metadata={"hdr_transform": "logc3"})
    plain = write_lora(folder / "plain.safetensors", seed=3)
    return folder, str(video), flags, str(hdr), str(plain)


def test_an_hdr_run_writes_exr_frames_and_a_preview(files, tmp_path, capsys):
    folder, video, flags, hdr, _ = files
    out = tmp_path / "hdr"
    assert main(["generate", *flags, "--hdr", video, "0.9", "--lora", hdr, "--width", "100", "--height", "70",
                 "--output", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"frame_{i:05d}.exr" for i in range(9)] + ["preview.mp4"]
    pixels, header = read_exr(out / "frame_00000.exr")
    assert pixels.shape == (70, 100, 3) and float(pixels.min()) >= 0 and header["colorSpace"] == "sRGB"
    assert "wrote 9 EXR frames 100x70" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    ([], "--hdr needs the HDR IC-LoRA \\(its metadata states hdr_transform\\): add it with --lora PATH"),
    (["--lora", "{plain}"], "state none"),
    (["--lora", "{hdr}", "--width", "40"], "at least 64x64 pixels"),
    (["--lora", "{hdr}", "--frames", "17"], "has 9 frames and the clip needs 17"),
    (["--lora", "{hdr}", "--image", "{video}"], "takes no --image; drop them"),
    (["--lora", "{hdr}", "--mode", "two-stage"], "drop --mode two-stage"),
    (["--lora", "{hdr}", "--tensors", "{tmp}/t.safetensors"], "--tensors writes frames and a waveform"),
])
def test_bad_hdr_command_lines_are_refused(files, tmp_path, capsys, extra, message):
    folder, video, flags, hdr, plain = files
    extra = [e.format(plain=plain, hdr=hdr, video=video, tmp=tmp_path) for e in extra]
    assert main(["generate", *flags, "--hdr", video, *extra, "--output", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert "model:" not in captured.out
    assert __import__("re").search(message, captured.err), captured.err


def test_other_refusals(files, tmp_path, capsys, monkeypatch):
    folder, video, flags, hdr, _ = files
    for argv, message in ((["--hdr", video, "0.5", "1"], "--hdr takes VIDEO [STRENGTH], got 3 values"),
                          (["--hdr", video, "much"], "the strength must be a number"),
                          (["--hdr-high-quality"], "go with --hdr VIDEO")):
        assert main(["generate", *flags, "--lora", hdr, *argv]) == 2
        assert message in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["generate", *flags, "--lora", hdr, "--hdr", video, "--output", str(tmp_path / "file")]) == 2
    assert "is a file; --hdr writes a folder" in capsys.readouterr().err
    real_import = builtins.__import__

    def no_openexr(name, *args, **kwargs):
        if name == "OpenEXR":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openexr)
    assert main(["generate", *flags, "--lora", hdr, "--hdr", video, "--output", str(tmp_path / "o")]) == 2
    assert "pip install OpenEXR" in capsys.readouterr().err


def test_text_embeddings_files_are_read_or_refused(tmp_path):
    from safetensors.torch import save_file

    from ltx2_core.__main__ import load_embeddings

    video, audio = torch.randn(7, 16), torch.randn(7, 8)
    save_file({"video_context": video, "audio_context": audio}, str(tmp_path / "e.safetensors"))
    embeddings = load_embeddings(str(tmp_path / "e.safetensors"), "cpu")
    assert torch.equal(embeddings.video, video[None]) and torch.equal(embeddings.audio, audio[None])  # a copy
    save_file({"video_context": video}, str(tmp_path / "half.safetensors"))
    with pytest.raises(ValueError, match="lacks audio_context"):
        load_embeddings(str(tmp_path / "half.safetensors"), "cpu")
