"""`--cache easycache` and its settings on the command line: ComfyUI EasyCache's defaults, every stage of the
request cached, and each combination it cannot serve refused with exit status 2 and the fix before any model loads;
a demo run prints what the cache skipped."""

from __future__ import annotations

import pytest

from ltx2_core.__main__ import build_request, main
from ltx2_core.cli_args import parse_args
from ltx2_core.sampling.cache import CacheSettings

SMALL = ["--width", "64", "--height", "64", "--frames", "9", "--no-progress"]


def test_the_defaults_are_easycaches_and_the_request_carries_them():
    request = build_request(parse_args(["--cache", "easycache"]))
    assert (request.cache.reuse_threshold, request.cache.start_percent, request.cache.end_percent) == (0.2, 0.15, 0.95)
    request = build_request(parse_args(["--cache", "easycache", "--cache-threshold", "0.5", "--cache-start", "0.2",
                                        "--cache-end", "0.9"]))
    assert request.cache == CacheSettings(reuse_threshold=0.5, start_percent=0.2, end_percent=0.9)
    assert build_request(parse_args([])).cache is None


@pytest.mark.parametrize("flags, message", [
    (["--cache-threshold", "0.3"], "--cache-threshold set step caching up: add --cache easycache"),
    (["--cache", "easycache", "--cuda-graphs"], "/ --cfg-parallel / --audio-only"),
    (["--cache", "easycache", "--audio-only"], "/ --cfg-parallel / --audio-only"),
], ids=["settings-without-cache", "cuda-graphs", "audio-only"])
def test_what_the_cache_cannot_serve_exits_2_with_the_fix(flags, message, capsys, tmp_path):
    assert main(["generate", *SMALL, *flags, "--output", str(tmp_path / "out.mp4")]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "model:" not in captured.out


@pytest.mark.parametrize("flag, value", [("--cache-start", "1.5"), ("--cache-end", "-0.1"),
                                         ("--cache-threshold", "nan"), ("--cache", "lazycache")])
def test_bad_values_are_refused_by_the_parser(flag, value, capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args([flag, value])
    assert stop.value.code == 2 and flag in capsys.readouterr().err


def test_a_demo_run_prints_the_steps_the_cache_skipped(capsys, tmp_path):
    flags = [*SMALL, "--steps", "12", "--cache", "easycache", "--cache-threshold", "1", "--output",
             str(tmp_path / "out.mp4")]
    assert main(["generate", *flags]) == 0
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("step cache: skipped")]
    skipped = int(line.split("skipped ")[1].split("/")[0])
    assert line.split("/")[1].startswith("12 steps") and 0 < skipped < 8, line
