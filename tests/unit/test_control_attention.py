"""IC-LoRA control with attention weights (an attention strength below 1, a pixel-space attention mask): the mask's
reading and downsampling to the latent grid, the weights' block structure in the stream, the bias the transformer
adds (and no bias where no weight is below 1), bad masks refused naming the fix, and a run with a mask file. Parity
with the reference: tests/parity/test_denoise_parity.py (`weighted`)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from support.control_video import FPS, FRAMES, SIZE, write_video

from ltx2_core.conditioning import ControlCondition, EncodedControl, condition_video
from ltx2_core.conditioning.control import control_weights, latent_weights, mask_pixels
from ltx2_core.demo.models import demo_models
from ltx2_core.geometry import video_positions
from ltx2_core.model.transformer.attention import attention_bias
from ltx2_core.pipeline import Request, sample_request
from ltx2_core.stages import attention_weights


@pytest.fixture(scope="module")
def models():
    return demo_models("2.3")


def _request(*controls) -> Request:
    return Request("a dancer in a studio", width=SIZE, height=SIZE, frames=FRAMES, fps=float(FPS), steps=2,
                   controls=controls)


@pytest.fixture
def control(tmp_path):
    return write_video(tmp_path / "depth.mp4", width=96, height=80, frames=17)


def test_the_mask_is_averaged_over_each_area_and_each_group_of_frames():
    """Left half 1, right half 0, each frame f at f / 8: the first latent frame keeps pixel frame 0, the second
    averages pixel frames 1..8 (causal VAE); the token order is (frame, row, column)."""
    mask = torch.zeros(1, 1, 9, 64, 64)
    mask[..., :32] = 1.0
    mask *= (torch.arange(9) / 8).view(1, 1, 9, 1, 1)
    weights = latent_weights(mask, (2, 2, 2))
    torch.testing.assert_close(weights, torch.tensor([0, 0, 0, 0, 4.5 / 8, 0, 4.5 / 8, 0]))


def test_a_mask_tensor_or_file_becomes_weights_times_the_attention_strength(tmp_path):
    """(frames, H, W, C): the channels' mean; a file: the channels' mean from [-1, 1] to [0, 1] at the stage's size
    (a white video: all 1); no mask: the strength alone, or no weights at strength 1."""
    rgb = torch.rand(FRAMES, 16, 16, 3, generator=torch.Generator().manual_seed(0))
    condition = ControlCondition("depth.mp4", attention_strength=0.5, attention_mask=rgb)
    torch.testing.assert_close(mask_pixels(condition, FRAMES, SIZE, SIZE), rgb.mean(-1)[None, None])
    weights = control_weights(condition, FRAMES, SIZE, SIZE, (2, 2, 2))
    torch.testing.assert_close(weights, latent_weights(rgb.mean(-1)[None, None], (2, 2, 2)) * 0.5)
    white = tmp_path / "white.mp4"
    import av
    with av.open(str(white), "w") as container:
        stream = container.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for _ in range(FRAMES):
            frame = np.full((64, 64, 3), 255, np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    pixels = mask_pixels(condition._replace(attention_mask=white), FRAMES, 32, 32)
    assert pixels.shape == (1, 1, FRAMES, 32, 32) and pixels.min() > 0.97
    assert control_weights(ControlCondition("c.mp4", attention_strength=0.3), FRAMES, SIZE, SIZE, (2, 2, 2)) == 0.3
    assert control_weights(ControlCondition("c.mp4"), FRAMES, SIZE, SIZE, (2, 2, 2)) is None


def test_weights_grow_by_groups_and_become_a_log_bias():
    """Two controls after the latent's T tokens, the second weighted: each group attends fully within itself, the
    weighted one with its weights to and from the latent's tokens, the groups not at all to each other; the bias is
    log w and the dtype's minimum at 0. Unweighted controls alone leave no weights (the attention runs unmasked)."""
    latent = torch.randn(1, 4, 128)
    stream = lambda *conditions: condition_video(latent, video_positions(1, 2, 2, 24.0), conditions, 24.0)
    plain = EncodedControl(torch.randn(1, 128, 1, 1, 2), 1.0)
    weighted = EncodedControl(torch.randn(1, 128, 1, 1, 3), 1.0, attention=torch.tensor([0.5, 0.0, 1.0]))
    assert stream(plain).attention is None and attention_weights(stream(plain)) is None
    weights = stream(plain, weighted).attention[0]
    assert weights.shape == (9, 9)
    assert torch.equal(weights[:6, :6], torch.ones(6, 6)) and torch.equal(weights[6:, 6:], torch.ones(3, 3))
    assert torch.equal(weights[:4, 6:], torch.tensor([[0.5, 0.0, 1.0]] * 4)) and torch.equal(weights[6:, :4],
                                                                                          weights[:4, 6:].T)
    assert torch.equal(weights[4:6, 6:], torch.zeros(2, 3)) and torch.equal(weights[6:, 4:6], torch.zeros(3, 2))
    bias = attention_bias(weights[None], torch.bfloat16)
    assert bias.shape == (1, 1, 9, 9) and bias.dtype == torch.bfloat16
    assert bias[0, 0, 0, 6] == torch.tensor(0.5).log().bfloat16() and bias[0, 0, 0, 8] == 0
    assert bias[0, 0, 0, 7] == torch.finfo(torch.bfloat16).min
    ones = EncodedControl(torch.randn(1, 128, 1, 1, 2), 1.0, attention=torch.ones(2))
    assert stream(ones).attention is not None and attention_weights(stream(ones)) is None  # all 1: no bias


def test_a_weighted_control_with_a_mask_file_changes_the_run(models, control, tmp_path):
    """Attention strength 0.5 with a mask video: a different run from the unweighted control; a strength 0 with the
    mask: the control reaches the video only through its tokens' own attention (still a different run)."""
    mask = write_video(tmp_path / "mask.mp4", frames=FRAMES, seed=3)
    positive, negative = models.prompt_encoder.encode("a dancer", "noise")
    runs = {}
    for name, settings in {"plain": {}, "half": {"attention_strength": 0.5},
                           "masked": {"attention_strength": 0.5, "attention_mask": str(mask)}}.items():
        request = _request(ControlCondition(control, 1.0, 2, **settings))
        request.check()
        runs[name] = sample_request(request, models, positive, negative)[0].video
    assert (runs["half"] - runs["plain"]).abs().max() > 1e-3
    assert (runs["masked"] - runs["half"]).abs().max() > 1e-3


@pytest.mark.parametrize("mask, match", [
    (torch.full((FRAMES, 8, 8), 2.0), "must hold values in [0, 1] (0: no attention, 1: full), got values in [2, 2]"),
    (torch.full((FRAMES, 8, 8), float("nan")), "must hold values in [0, 1]"),
    (torch.ones(FRAMES, 8, 8, dtype=torch.uint8), "must be a video file or a float tensor"),
    (torch.ones(8, 8), "must be a video file or a float tensor"),
    (torch.ones(1, 8, 8), ("has 1 frames, which do not fall into the clip's 2 latent frames (the first alone, then "
                           "groups of equal size); give 9 frames")),
    ("short", "has 5 frames and the clip 9; give a mask video of at least 9 frames"),
    ("noise", "damaged or not a video PyAV can decode"),
    ("missing", "does not exist"),
])
def test_bad_masks_are_refused_naming_the_fix(control, tmp_path, mask, match):
    if mask == "short":
        mask = str(write_video(tmp_path / "short.mp4", frames=5))
    elif mask == "noise":
        mask = tmp_path / "noise.mp4"
        mask.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif mask == "missing":
        mask = str(tmp_path / "nowhere.mp4")
    with pytest.raises(ValueError, match=re.escape(match)):
        _request(ControlCondition(control, 1.0, 2, 0.5, mask)).check()


# the command line


def test_the_control_flag_reads_strength_attention_and_mask(tmp_path):
    """PATH[:STRENGTH[:ATTENTION[:MASK]]], read from the right (a path may hold colons); the mask a file."""
    from ltx2_core import cli_values

    video, mask = write_video(tmp_path / "a:depth.mp4"), write_video(tmp_path / "mask.mp4")
    assert cli_values.control(str(video)) == ControlCondition(str(video))
    assert cli_values.control(f"{video}:0.9:0.5") == ControlCondition(str(video), 0.9, 1, 0.5)
    assert cli_values.control(f"{video}:0.9:0.5:{mask}") == ControlCondition(str(video), 0.9, 1, 0.5, str(mask))
    assert cli_values.control("missing.mp4:1:0.5:mask.mp4") == ControlCondition("missing.mp4", 1.0, 1, 0.5,
                                                                                  "mask.mp4")
    with pytest.raises(Exception, match=re.escape("ATTENTION must be a number in [0, 1] (the attention strength), "
                                                  "got 'x'")):
        cli_values.control(f"{video}:0.9:x")


def test_the_command_line_generates_with_a_weighted_control_and_refuses_a_bad_mask(tmp_path, control,
                                                                                   tiny_checkpoints, gemma_files,
                                                                                   capsys):
    from support.model_files import write_lora

    from ltx2_core.__main__ import main

    lora = write_lora(tmp_path / "depth.safetensors", 2, metadata={"reference_downscale_factor": "2"})
    mask = write_video(tmp_path / "mask.mp4", frames=FRAMES, seed=5)
    flags = ["generate", "--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]),
             "--width", "64", "--height", "64", "--frames", "9", "--steps", "2", "--stg-blocks", "1",
             "--audio-stg-blocks", "1", "--no-progress", "--output", str(tmp_path / "out.mp4"), "--lora", str(lora)]
    assert main(flags + ["--control", f"{control}:0.9:0.5:{mask}"]) == 0, capsys.readouterr().err
    assert "wrote" in capsys.readouterr().out
    short = write_video(tmp_path / "short.mp4", frames=5)
    (tmp_path / "out.mp4").unlink()
    assert main(flags + ["--control", f"{control}:0.9:0.5:{short}"]) == 2
    captured = capsys.readouterr()
    assert "has 5 frames and the clip 9; give a mask video of at least 9 frames" in captured.err, captured.err
    assert "loaded in" not in captured.out and not (tmp_path / "out.mp4").exists()
