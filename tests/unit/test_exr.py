"""The EXR sequence writer (`ltx2_core.exr`, over the OpenEXR package): half float and float frames round trip
(half: equal to the frames rounded to float16, a pure conversion, so exact; float: exact), the header as the
reference writes it (ZIP, Rec.709 chromaticities, colorSpace), and the refusal naming `pip install OpenEXR` where the
package is missing."""

from __future__ import annotations

import builtins

import pytest
import torch

from ltx2_core import exr
from ltx2_core.hdr import REC709_CHROMATICITIES

pytest.importorskip("OpenEXR")


def _frames() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.rand(3, 6, 10, 3, generator=generator) * 20  # highlights well above 1


def test_a_half_float_sequence_round_trips(tmp_path):
    frames = _frames()
    paths = exr.write_exr_sequence(frames, tmp_path / "out")
    assert [p.name for p in paths] == ["frame_00000.exr", "frame_00001.exr", "frame_00002.exr"]
    for frame, path in zip(frames, paths):
        pixels, header = exr.read_exr(path)
        assert torch.equal(pixels, frame.half().float())  # float16 rounding only: exact
        assert header["compression"].name == "ZIP_COMPRESSION" and header["colorSpace"] == "sRGB"
        assert header["chromaticities"] == pytest.approx(REC709_CHROMATICITIES, abs=1e-6)


def test_a_float_frame_round_trips(tmp_path):
    frame = _frames()[0]
    pixels, _ = exr.read_exr(exr.write_exr(frame, tmp_path / "f.exr", half=False, color_space="ACEScg"))
    assert torch.equal(pixels, frame)  # fp32 stored as is


def test_bad_shapes_and_a_missing_package_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="frames, height, width, 3"):
        exr.write_exr_sequence(torch.zeros(2, 4, 4), tmp_path)
    real_import = builtins.__import__

    def no_openexr(name, *args, **kwargs):
        if name == "OpenEXR":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openexr)
    with pytest.raises(exr.OpenEXRMissing, match="pip install OpenEXR"):
        exr.write_exr_sequence(_frames(), tmp_path / "none")
    assert not (tmp_path / "none").exists()  # refused before anything is written
