"""The main job (`python -m ltx2_core`) from files (the demo run is in test_repository): checkpoint + ComfyUI text
encoder, and bad input exiting with status 2."""

from __future__ import annotations

from ltx2_core.__main__ import main


def test_run_from_checkpoint_and_comfyui_text_encoder(capsys, gemma_files, tiny_checkpoints, tmp_path):
    """Every component from the files: DiT, Gemma + connectors, video VAE, audio VAE, vocoder."""
    output = tmp_path / "out.mp4"
    args = ["--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]), "--output",
            str(output), "--fps", "25"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "video context (2, 1024, 12)" in out and "velocity (2, 18, 128)" in out
    assert f"wrote {output}" in out and output.stat().st_size > 0


def test_bad_input_exits_2_with_the_fix(capsys, tmp_path):
    assert main(["--text-encoder", str(tmp_path / "gemma.safetensors")]) == 2
    assert "--text-encoder needs --checkpoint" in capsys.readouterr().err
    assert main(["--checkpoint", str(tmp_path / "missing.safetensors")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
