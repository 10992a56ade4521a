"""Images from the command line: PATH[:FRAME[:STRENGTH[:CRF]]] read from the right (-1: the last frame), the bad
field named; damaged, truncated and too-thin files refused with exit status 2 before any model work; 16-bit grayscale
scaled to 8 bits, not clipped."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

import ltx2_core.model_files as model_files
from ltx2_core.__main__ import build_request, main, parse_args
from ltx2_core.conditioning.images import ImageCondition, prepare_image, read_image


def _pixels(height=64, width=64):
    return np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)


def _png_with_idat(path, change):
    """A PNG whose IDAT chunk data is passed through `change`, with a recomputed (valid) checksum unless asked."""
    Image.fromarray(_pixels()).save(path)
    data = bytearray(path.read_bytes())
    start = data.index(b"IDAT")
    length = struct.unpack(">I", data[start - 4:start])[0]
    body = change(bytes(data[start + 4:start + 4 + length]))
    crc = struct.pack(">I", zlib.crc32(b"IDAT" + body) & 0xFFFFFFFF)
    path.write_bytes(bytes(data[:start + 4]) + body + crc + bytes(data[start + 8 + length:]))
    return path


def _broken_files(tmp_path):
    jpeg = tmp_path / "whole.jpg"
    Image.fromarray(_pixels()).save(jpeg, quality=90)
    (tmp_path / "truncated.jpg").write_bytes(jpeg.read_bytes()[: jpeg.stat().st_size // 2])
    _png_with_idat(tmp_path / "damaged.png", lambda body: body[:20] + bytes(b ^ 0xA5 for b in body[20:60]) + body[60:])
    bad_crc = _png_with_idat(tmp_path / "bad_crc.png", lambda body: body)
    data = bytearray(bad_crc.read_bytes())
    data[data.index(b"IEND") - 5] ^= 0xFF  # the last byte of IDAT's checksum (before IEND's length)
    bad_crc.write_bytes(bytes(data))
    Image.fromarray(_pixels(64, 1)).save(tmp_path / "thin.png")
    Image.fromarray(_pixels()).save(tmp_path / "cat.png")


BAD = [
    ("truncated.jpg", "truncated.jpg is damaged or truncated"),
    ("damaged.png", "damaged.png is damaged or truncated"),
    ("bad_crc.png", "bad_crc.png is damaged or truncated"),
    ("thin.png", "is 1x64 pixels; the H.264 round trip needs at least 2 on each side"),
    ("cat.png:0:-0.1", "image strength must be in [0, 1], got -0.1"),
    ("cat.png:-2", "pixel frame index in 0..16, got -2"),
    ("cat.png:0:1:60", "CRF must be an integer in 0..51"),
]


@pytest.mark.parametrize("value, message", BAD, ids=[v for v, _ in BAD])
def test_bad_images_exit_2_before_any_model_work(value, message, tmp_path, capsys, monkeypatch):
    def no_model_work(*args, **kwargs):
        raise AssertionError("models were loaded for a bad request")

    monkeypatch.setattr("ltx2_core.demo.demo_models", no_model_work)
    monkeypatch.setattr(model_files, "load_transformer", no_model_work)
    _broken_files(tmp_path)
    assert main(["generate", "--frames", "17", "--output", str(tmp_path / "x.mp4"),
                 "--image", f"{tmp_path}/{value}"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "model:" not in captured.out and "Traceback" not in captured.err
    assert list(tmp_path.glob("*.mp4")) == []


@pytest.mark.parametrize("settings, field, text", [
    ("1.5", "FRAME must be an integer (-1: the last frame)", "'1.5'"),
    ("0:x", "STRENGTH must be a number in [0, 1]", "'x'"),
    ("0:1:.5", "CRF must be an integer", "'.5'"),
    ("0:1:33:4", "4 settings after", ""),
])
def test_a_bad_setting_after_an_existing_file_is_named(settings, field, text, tmp_path, capsys):
    Image.fromarray(_pixels()).save(tmp_path / "cat.png")
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--image", f"{tmp_path}/cat.png:{settings}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and field in err and text in err and "no such file" not in err


def test_settings_are_read_from_the_right_with_minus_one_the_last_frame(tmp_path):
    Image.fromarray(_pixels()).save(tmp_path / "a:b.png")  # a colon inside the name
    path = f"{tmp_path}/a:b.png"
    args = parse_args(["--frames", "25", "--image", f"{path}:-1:.5", "--image", path, "--image", f"{path}:8:0.9:0"])
    # None: the release's CRF; False: held, not a keyframe (the command line's --mode keyframes appends them all)
    assert [tuple(i) for i in build_request(args).images] == [(path, 24, 0.5, None, False), (path, 0, 1.0, None, False),
                                                              (path, 8, 0.9, 0, False)]
    missing = parse_args(["--image", f"{tmp_path}/missing.png:-1:.5"]).image[0]
    assert missing == ImageCondition(f"{tmp_path}/missing.png", -1, 0.5)  # reported later as "no such file"


def test_16_bit_grayscale_is_scaled_to_8_bits_not_clipped(tmp_path):
    gray = (np.arange(64 * 64).reshape(64, 64) * 16).astype(np.uint16)  # 0..65520
    Image.fromarray(gray).save(tmp_path / "gray16.png")
    with Image.open(tmp_path / "gray16.png") as image:
        assert image.mode.startswith("I")
    pixels = read_image(tmp_path / "gray16.png")
    assert pixels.shape == (64, 64, 3) and pixels.dtype == np.uint8
    np.testing.assert_array_equal(pixels[..., 1], np.round(gray / 257).astype(np.uint8))
    condition = ImageCondition(str(tmp_path / "gray16.png"), crf=0)
    condition.check(9)
    assert prepare_image(condition, 64, 64).std() > 0.3  # a gradient, not all white


def test_the_check_reads_every_pixel_of_a_whole_image(tmp_path):
    _broken_files(tmp_path)
    for name in ("whole.jpg", "cat.png"):
        ImageCondition(str(tmp_path / name)).check(9)
