"""Writing scene-linear HDR frames as an OpenEXR sequence (the HDR IC-LoRA's output), over the `OpenEXR` package
from PyPI (Academy Software Foundation's bindings; in requirements.txt, imported only when a file is written).

As ltx-pipelines 1.2.0's `save_exr_tensor` writes them: one scanline file per frame, RGB in half float (or full
float), ZIP compression, the `chromaticities` of Rec.709 and a `colorSpace` tag ("sRGB": linear light in Rec.709
primaries, the reference's default tag). Names `frame_00000.exr`, `frame_00001.exr`, ... in a folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ltx2_core.hdr import REC709_CHROMATICITIES

MISSING = ("writing EXR files needs the OpenEXR package, which is not installed in this Python: "
           "pip install OpenEXR (it is in the pack's requirements.txt)")


class OpenEXRMissing(ValueError):
    """The OpenEXR package is not installed (the message names `pip install OpenEXR`)."""


def _openexr():
    try:
        import OpenEXR
    except ImportError:
        raise OpenEXRMissing(MISSING) from None
    return OpenEXR


def check_openexr() -> None:
    """OpenEXRMissing (a ValueError) naming `pip install OpenEXR` where the package is missing (before any model
    work)."""
    _openexr()


def write_exr(frame: torch.Tensor, path: str | os.PathLike, *, half: bool = True, color_space: str = "sRGB",
              chromaticities: tuple[float, ...] = REC709_CHROMATICITIES) -> Path:
    """One (H, W, 3) frame of linear light to `path` (half or full float, ZIP); returns the path."""
    exr = _openexr()
    if frame.dim() != 3 or frame.shape[-1] != 3:
        raise ValueError(f"an EXR frame is (height, width, 3) RGB, got {tuple(frame.shape)}")
    pixels = np.ascontiguousarray(frame.detach().float().cpu().numpy().astype(np.float16 if half else np.float32))
    header = {"compression": exr.ZIP_COMPRESSION, "type": exr.scanlineimage,
              "chromaticities": tuple(float(c) for c in chromaticities), "colorSpace": color_space}
    path = Path(path)
    exr.File(header, {"RGB": pixels}).write(str(path))
    return path


def write_exr_sequence(frames: torch.Tensor, folder: str | os.PathLike, prefix: str = "frame_", *,
                       half: bool = True, color_space: str = "sRGB") -> list[Path]:
    """Frames (F, H, W, 3) of linear light as `folder`/`prefix`00000.exr ... (the folder is made); their paths.
    The OpenEXR package is checked before anything is written."""
    _openexr()
    if frames.dim() != 4 or frames.shape[-1] != 3:
        raise ValueError(f"an EXR sequence is (frames, height, width, 3) RGB, got {tuple(frames.shape)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [write_exr(frame, folder / f"{prefix}{index:05d}.exr", half=half, color_space=color_space)
            for index, frame in enumerate(frames)]


def read_exr(path: str | os.PathLike) -> tuple[torch.Tensor, dict]:
    """An RGB EXR file's (H, W, 3) pixels as fp32 and its header (what a round trip checks)."""
    exr = _openexr()
    with exr.File(str(path)) as file:
        header = dict(file.header())
        channels = file.channels()
        if "RGB" in channels:
            pixels = channels["RGB"].pixels
        else:
            pixels = np.stack([channels[name].pixels for name in "RGB"], axis=-1)
    return torch.from_numpy(np.asarray(pixels, dtype=np.float32).copy()), header
