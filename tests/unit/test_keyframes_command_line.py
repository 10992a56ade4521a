"""`--mode keyframes` on the command line: the --image keyframes (PATH:FRAME:STRENGTH) interpolated by the demo model
into an mp4; one image exits with status 2 before any model loads, naming --mode two-stage."""

from __future__ import annotations

import numpy as np
from PIL import Image

from ltx2_core.__main__ import build_request, main
from ltx2_core.cli_args import parse_args

SMALL = ["--width", "64", "--height", "64", "--frames", "9", "--steps", "1", "--no-progress"]


def _images(folder):
    rng = np.random.default_rng(0)
    paths = []
    for name in ("a", "b"):
        paths.append(folder / f"{name}.png")
        Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(paths[-1])
    return paths


def test_one_image_is_refused_naming_the_fix(tmp_path, capsys):
    first, _ = _images(tmp_path)
    assert main(["generate", *SMALL, "--mode", "keyframes", "--image", str(first),
                 "--output", str(tmp_path / "out.mp4")]) == 2
    captured = capsys.readouterr()
    assert "at least two images" in captured.err and "mode two-stage for one image" in captured.err
    assert "model:" not in captured.out and not (tmp_path / "out.mp4").exists()


def test_keyframes_interpolate_the_images_at_their_frames(tmp_path, capsys):
    first, last = _images(tmp_path)
    flags = [*SMALL, "--mode", "keyframes", "--image", str(first), "--image", f"{last}:-1:0.8",
             "--output", str(tmp_path / "out.mp4")]
    request = build_request(parse_args(flags))
    assert request.mode == "keyframes" and [(i.frame, i.strength) for i in request.images] == [(0, 1.0), (8, 0.8)]
    assert main(["generate", *flags]) == 0, capsys.readouterr().err[-2000:]
    assert (tmp_path / "out.mp4").stat().st_size > 0
