"""`python -m ltx2_core generate` checks every argument before any model loads: a bad --output or --tensors, a
--version against a checkpoint of another release, an --image folder, a --lora STRENGTH that is no number, a LoRA
that does not fit, a transformer file without its config: each ends with exit status 2 and the fix, nothing loaded
and nothing written. Its --help is written for users; an image's transparency is reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.__main__ import build_request, check_early, main
from ltx2_core.cli_args import parse_args, parser
from ltx2_core.conditioning.images import read_image
from ltx2_core.demo import demo_lora, demo_transformer
from ltx2_core.model_files import ModelFiles
from support.model_files import write_lora, write_upsampler

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--width", "64", "--height", "64", "--frames", "9", "--steps", "1", "--no-progress"]


def _refused(flags: list[str], capsys) -> str:
    """main()'s stderr for a request it must refuse with exit status 2 before any model line is printed."""
    assert main(["generate", *flags]) == 2
    captured = capsys.readouterr()
    assert "model:" not in captured.out
    return captured.err


OUTPUTS = [
    (["--output", "{tmp}"], "--output {tmp}: {tmp} is a folder; name a file in it, e.g. {tmp}/output.mp4"),
    (["--output", "/proc/ltx2-cli-test.mp4"], "--output /proc/ltx2-cli-test.mp4: cannot write in /proc"),
    (["--output", "{tmp}/e.avi"], "written as an MP4 (H.264 video, AAC sound; --audio-only writes a .wav): end its "
                                  "name in .mp4, e.g. e.mp4"),
    (["--tensors", "{tmp}"], "--tensors {tmp}: {tmp} is a folder"),
    (["--tensors", "/proc/t.safetensors"], "--tensors /proc/t.safetensors: cannot write in /proc"),
    (["--tensors", "{tmp}/t.pt"], "end its name in .safetensors, e.g. t.safetensors"),
]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="/proc is Linux's")
@pytest.mark.parametrize("flags, message", OUTPUTS, ids=[" ".join(f) for f, _ in OUTPUTS])
def test_a_bad_output_exits_2_before_the_demo_loads(flags, message, tmp_path):
    """As a user runs it: a fresh process with the demo model, which would otherwise generate, then fail to write."""
    flags = [flag.format(tmp=tmp_path) for flag in flags]
    if "--output" not in flags:
        flags += ["--output", str(tmp_path / "out.mp4")]
    run = subprocess.run([sys.executable, "-m", "ltx2_core", "generate", *SMALL, *flags], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    assert message.format(tmp=tmp_path) in run.stderr and "Traceback" not in run.stderr
    assert "model:" not in run.stdout  # the line printed just before the models load
    assert list(tmp_path.iterdir()) == []  # no mp4, no probe or partial file left behind


def test_the_help_is_written_for_users():
    """A description of what the command does (not a module docstring), help on every option, the size defaults,
    and --steps not promising what distilled refuses."""
    cli = parser()
    text = cli.format_help()
    assert cli.description.startswith("Generate a video with its sound") and "`cli_values`" not in text
    assert "exit status 2" in cli.description and "examples:" in text
    assert [action.option_strings for action in cli._actions if not action.help] == []
    helps = {action.dest: action.help for action in cli._actions}
    assert "default 768, two-stage and distilled 1536; the demo model 96, two-stage and distilled 128" in helps["width"]
    assert "default 512, two-stage and distilled 1024" in helps["height"]
    assert "default 121; the demo model 17" in helps["frames"]
    assert "not with --mode distilled" in helps["steps"] and "distilled: 8" not in helps["steps"]
    assert "cpu" in helps["device"] and "two-stage" in helps["mode"] and "default 0" in helps["seed"]


def test_the_readmes_commands_leave_git_status_clean():
    """The virtual environment the README's install may make and both default outputs are ignored."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = [".venv/bin/python", "ltx2_output.mp4", "ltx2_output.wav"]
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", *paths], capture_output=True, text=True)
    assert ignored.stdout.split() == paths


def test_a_version_other_than_the_checkpoints_is_refused(tiny_checkpoints, gemma_files, tmp_path, capsys,
                                                         no_model_work):
    flags = ["--checkpoint", str(tiny_checkpoints["2.3"]), "--text-encoder", str(gemma_files[0]),
             "--output", str(tmp_path / "x.mp4")]
    err = _refused([*flags, "--version", "2.5"], capsys)
    assert (f"--version 2.5 picks the demo model's structure, and --checkpoint {tiny_checkpoints['2.3']} is an "
            "LTX-2.3 model (its header says so): drop --version") in err
    args = parse_args([*flags, "--version", "2.3"])  # the file's own release is accepted
    files = ModelFiles(args.checkpoint, args.text_encoder)
    assert check_early(args, build_request(args), files).frames == 121


def test_an_image_folder_and_a_lora_strength_that_is_no_number_are_named(tmp_path, tiny_checkpoints, gemma_files,
                                                                         capsys, no_model_work):
    err = _refused(["--image", str(tmp_path), "--output", str(tmp_path / "x.mp4")], capsys)
    assert f"image {tmp_path} is a folder; give an image file" in err
    lora = write_lora(tmp_path / "style.safetensors", seed=2)
    with pytest.raises(SystemExit) as exited:
        main(["generate", "--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]),
              "--lora", f"{lora}:abc"])
    assert exited.value.code == 2
    assert f"argument --lora: {lora}:abc: STRENGTH must be a number" in capsys.readouterr().err
    assert parse_args(["--lora", f"{lora}:0.5"]).lora == [(str(lora), 0.5)]


def test_a_lora_that_does_not_fit_is_refused_from_the_headers(tiny_checkpoints, gemma_files, tmp_path, capsys,
                                                              no_model_work):
    """A LoRA of a five-block model on the three-block checkpoint: named with the blocks it lacks, before loading."""
    lora = demo_lora(demo_transformer(TransformerConfig.tiny("2.0", num_layers=5)), seed=3)
    tensors = {}
    for target, pair in lora.pairs.items():
        stem = "diffusion_model." + target[: -len(".weight")]
        tensors[stem + ".lora_A.weight"], tensors[stem + ".lora_B.weight"] = pair.down, pair.up
    save_file(tensors, str(tmp_path / "deep.safetensors"))
    err = _refused(["--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]), "--lora",
                    f"{tmp_path / 'deep.safetensors'}:0.5", "--output", str(tmp_path / "x.mp4")], capsys)
    assert "LoRA deep.safetensors does not fit this model" in err and "transformer_blocks.3." in err
    fitting = write_lora(tmp_path / "fits.safetensors", seed=2)
    ModelFiles(str(tiny_checkpoints["2.0"]), str(gemma_files[0]), loras=((str(fitting), 1.0),)).check("one-stage")


def test_the_checkpoint_is_checked_before_the_text_encoder(tmp_path, tiny_checkpoints, capsys, no_model_work):
    err = _refused(["--checkpoint", str(tmp_path / "missing.safetensors"), "--output", str(tmp_path / "x.mp4")],
                   capsys)
    assert "missing.safetensors: no such file" in err and "--text-encoder" not in err
    upsampler = write_upsampler(tmp_path / "up.safetensors")
    err = _refused(["--checkpoint", str(upsampler), "--output", str(tmp_path / "x.mp4")], capsys)
    assert "this is an LTX-2.0 latent upsampler, not an LTX-2 checkpoint" in err


def _transformer_only(path: Path, version: str, metadata: dict[str, str] | None) -> Path:
    from support.transformer25 import write_transformer25

    config = TransformerConfig.tiny(version)
    return write_transformer25(path, demo_transformer(config).state_dict(), config, metadata=metadata or {})


def test_a_transformer_without_config_metadata_is_named_as_such(tmp_path, gemma_files, capsys, no_model_work):
    """Not taken for LTX-2.5 and asked for 2.5's VAE files: the missing metadata is the problem named."""
    path = _transformer_only(tmp_path / "export.safetensors", "2.3", None)
    err = _refused(["--checkpoint", str(path), "--text-encoder", str(gemma_files[0]),
                    "--output", str(tmp_path / "x.mp4")], capsys)
    assert "export.safetensors: no 'config' metadata, so the model shape is unknown" in err
    assert "2.5" not in err


def test_an_ltx_2_0_transformer_only_file_is_pointed_to_its_own_checkpoint(tmp_path, gemma_files, capsys,
                                                                          no_model_work):
    from support.transformer25 import transformer25_metadata

    config = TransformerConfig.tiny("2.0")
    path = _transformer_only(tmp_path / "ltx-2-transformer.safetensors", "2.0",
                             transformer25_metadata(config, "2.0.0"))
    err = _refused(["--checkpoint", str(path), "--text-encoder", str(gemma_files[0]),
                    "--output", str(tmp_path / "x.mp4")], capsys)
    assert "is an LTX-2.0 transformer without the VAEs it needs for decoding; use the full LTX-2.0 checkpoint " \
           "(ltx-2-19b-dev.safetensors)" in err


def test_an_images_transparency_is_reported_and_dropped_as_the_reference_drops_it(tmp_path, capsys):
    """Both reference pipelines drop the alpha channel (1.0.0 keeps the first three channels, 1.2.0 converts RGBA to
    RGB), so the stored colour shows through; the command line says so for an image that has transparent pixels."""
    pixels = (np.arange(32 * 48 * 4) % 251).astype(np.uint8).reshape(32, 48, 4)
    pixels[..., 3] = np.where(np.arange(48) < 24, 0, 255)[None, :]
    Image.fromarray(pixels, "RGBA").save(tmp_path / "cut-out.png")
    opaque = pixels.copy()
    opaque[..., 3] = 255
    Image.fromarray(opaque, "RGBA").save(tmp_path / "opaque.png")
    with Image.open(tmp_path / "cut-out.png") as image:
        reference_100, reference_120 = np.array(image)[..., :3], np.array(image.convert("RGB"))
    assert np.array_equal(read_image(tmp_path / "cut-out.png"), reference_100)
    assert np.array_equal(read_image(tmp_path / "cut-out.png"), reference_120)
    for name, noted in (("cut-out.png", True), ("opaque.png", False)):
        args = parse_args(["--image", str(tmp_path / name), "--output", str(tmp_path / "x.mp4")])
        check_early(args, build_request(args), ModelFiles())
        err = capsys.readouterr().err
        assert (f"note: image {tmp_path / name} has transparent pixels; its alpha channel is dropped" in err) is noted
