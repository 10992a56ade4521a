"""IC-LoRA control through the loader, `conditioning.control`, the pipeline and the command line, on real mp4s made
with PyAV and real tiny LoRA safetensors with metadata: the LoRA's reference_downscale_factor is read (conflicts
refused naming both files), the control video is read and encoded at its size, appended in stage 1 only, and every
bad input is refused before model work (the reading vs the reference's: tests/parity/test_control_reading_parity.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import ltx2_core.model_files as model_files
from ltx2_core.__main__ import main
from ltx2_core.conditioning import CONDITIONS, ControlCondition, EncodedControl
from ltx2_core.demo.models import demo_models
from ltx2_core.geometry import latent_shape
from ltx2_core.loader.lora import lora_reference_scale, reference_downscale_factor
from ltx2_core.pipeline import Request, check_request, sample_request
from support.control_video import FPS, FRAMES, SIZE, write_video
from support.model_files import write_lora


@pytest.fixture(scope="module")
def models():
    return demo_models("2.3")


@pytest.fixture
def control(tmp_path):
    return write_video(tmp_path / "depth.mp4", width=96, height=80, frames=17)


def _request(*controls, **settings) -> Request:
    return Request("a dancer in a studio", **{"width": SIZE, "height": SIZE, "frames": FRAMES, "fps": float(FPS),
                                              "steps": 2, "controls": controls} | settings)


# the LoRA's factor


def test_conflicting_and_bad_factors_are_refused_naming_the_files(tmp_path):
    half = write_lora(tmp_path / "depth.safetensors", 2, metadata={"reference_downscale_factor": "2"})
    quarter = write_lora(tmp_path / "canny.safetensors", 3, metadata={"reference_downscale_factor": "4"})
    with pytest.raises(ValueError, match=f"LoRA {re.escape(str(half))} wants control videos at 1/2 .* LoRA "
                                         f"{re.escape(str(quarter))} at 1/4; .* use one of them"):
        reference_downscale_factor([half, quarter])
    bad = write_lora(tmp_path / "bad.safetensors", 4, metadata={"reference_downscale_factor": "half"})
    with pytest.raises(ValueError, match="reference_downscale_factor='half' .* must be an integer ≥ 1"):
        reference_downscale_factor([bad])
    timed = write_lora(tmp_path / "timed.safetensors", 5, metadata={"reference_temporal_scale_factor": "2"})
    with pytest.raises(ValueError, match="subsampled in time .* not do yet"):
        lora_reference_scale(timed)


# reading, encoding, the condition


def test_the_control_kind_is_registered():
    assert CONDITIONS["control"] is EncodedControl


# the pipeline


def test_the_control_guides_stage_one_and_its_tokens_are_dropped(models, control):
    """One-stage: the control changes the run and the latent keeps the clip's shape; two-stage: the control is
    encoded once, at stage 1's half size / downscale (the encoder sees 16×16 pixels), as the reference."""
    request = _request(ControlCondition(control, 1.0, 2))
    check_request(request, models)
    positive, negative = models.prompt_encoder.encode(request.prompt, "noise")
    guided, _ = sample_request(request, models, positive, negative)
    free, _ = sample_request(_request(), models, positive, negative)
    assert guided.video.shape == free.video.shape == (1, 128, *latent_shape(FRAMES, SIZE, SIZE))
    assert (guided.video - free.video).abs().max() > 1e-3
    seen = []
    hook = models.video_encoder.register_forward_pre_hook(lambda module, args: seen.append(tuple(args[0].shape)))
    try:
        two = _request(ControlCondition(control, 1.0, 2), mode="two-stage", width=128, height=128)
        sample_request(two, models, positive, negative)
    finally:
        hook.remove()
    assert seen == [(1, 3, FRAMES, 32, 32)]


def test_a_longer_24_fps_control_file_gives_the_clips_first_frames(models, tmp_path):
    """17 frames of a 40-frame 24 fps file were read as 18 and refused by the encoder after the model loaded; a
    longer control is cut to the clip's first frames, as the reference's frame cap."""
    from ltx2_core.conditioning.control import encode_control

    path = write_video(tmp_path / "long-depth.mp4", width=64, height=64, frames=40)
    condition = ControlCondition(path)
    condition.check(17, ((64, 64),))
    encoded = encode_control(condition, models.video_encoder, 17, 64, 64)
    assert tuple(encoded.latent.shape[2:]) == latent_shape(17, 64, 64)


@pytest.mark.parametrize("change, match", [
    ({"frames": 25}, "has 17 frames and the clip 25; the control needs at least as many frames as the clip"),
    ({"width": 96}, "at 1/2 of the 96x64 stage, which must come to multiples of 32 pixels; choose width and height "
                    "multiples of 64"),
    ({"mode": "two-stage", "width": 128, "height": 128}, None),
    ({"mode": "two-stage", "width": 192, "height": 128}, "at 1/2 of the 96x64 stage"),
    ({"audio_only": True}, "drop them for text to audio"),
])
def test_a_request_the_control_cannot_serve_is_refused(control, change, match):
    request = _request(ControlCondition(control, 1.0, 2), **change)
    if match is None:
        request.check()  # stage 1 at 64×64, the control at 32×32
        return
    with pytest.raises(ValueError, match=re.escape(match)):
        request.check()


@pytest.mark.parametrize("settings, match", [
    ({"strength": 1.5}, "strength must be in [0, 1]"),
    ({"downscale": 0}, "downscale must be an integer ≥ 1"),
    ({"attention_strength": 1.5}, "attention_strength must be in [0, 1]"),
    ({"attention_mask": torch.ones(1, 1, FRAMES, SIZE, SIZE)}, "must be a video file or a float tensor (frames, H, W)"),
])
def test_bad_control_settings_are_refused(control, settings, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        _request(ControlCondition(control, **settings)).check()


def test_an_undecodable_control_and_a_model_without_the_encoder_are_refused(models, control, tmp_path):
    noise = tmp_path / "noise.mp4"
    noise.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match="damaged or not a video PyAV can decode"):
        _request(ControlCondition(noise)).check()
    with pytest.raises(ValueError, match="a control video needs the video VAE encoder"):
        check_request(_request(ControlCondition(control)), models._replace(video_encoder=None))


# the command line


def _flags(tmp_path, ckpt, text_encoder, *extra):
    return ["generate", "--checkpoint", str(ckpt), "--text-encoder", str(text_encoder), "--width", "64", "--height",
            "64", "--frames", "9", "--steps", "2", "--stg-blocks", "1", "--audio-stg-blocks", "1", "--no-progress",
            "--output", str(tmp_path / "out.mp4"), *extra]


def test_the_command_line_generates_with_a_control_and_an_ic_lora(tmp_path, control, tiny_checkpoints, gemma_files,
                                                                  capsys):
    lora = write_lora(tmp_path / "depth.safetensors", 2, metadata={"reference_downscale_factor": "2"})
    args = _flags(tmp_path, tiny_checkpoints["2.0"], gemma_files[0], "--lora", f"{lora}:0.8", "--control",
                  f"{control}:0.9")
    assert main(args) == 0, capsys.readouterr().err
    assert f"wrote {tmp_path / 'out.mp4'}: 9 frames 64x64" in capsys.readouterr().out


@pytest.mark.parametrize("case, match", [
    ("no lora", "--control guides the generation through an IC-LoRA; add it with --lora"),
    ("conflict", "use one of them"),
    ("short", "has 5 frames and the clip 9"),
    ("undecodable", "damaged or not a video PyAV can decode"),
    ("missing", "does not exist; check the path"),
])
def test_bad_control_input_exits_2_before_model_work(case, match, tmp_path, tiny_checkpoints, gemma_files, capsys,
                                                     monkeypatch):
    def no_model_work(*args, **kwargs):
        raise AssertionError("models were loaded for a bad request")

    monkeypatch.setattr(model_files, "load_transformer", no_model_work)
    video = write_video(tmp_path / "pose.mp4")
    loras = ["--lora", str(write_lora(tmp_path / "pose.safetensors", 2,
                                      metadata={"reference_downscale_factor": "2"}))]
    if case == "no lora":
        loras = []
    elif case == "conflict":
        loras += ["--lora", str(write_lora(tmp_path / "canny.safetensors", 3,
                                           metadata={"reference_downscale_factor": "4"}))]
    elif case == "short":
        video = write_video(tmp_path / "short.mp4", frames=5)
    elif case == "undecodable":
        video = tmp_path / "noise.mp4"
        video.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif case == "missing":
        video = tmp_path / "nowhere.mp4"
    assert main(_flags(tmp_path, tiny_checkpoints["2.0"], gemma_files[0], *loras, "--control", str(video))) == 2
    captured = capsys.readouterr()
    assert match in captured.err, captured.err
    assert "loaded in" not in captured.out and not (tmp_path / "out.mp4").exists()
