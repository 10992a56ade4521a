"""NaN or infinite values never become a silent video: damaged weights (or a float16 overflow) end the generation
with an error that names the stage and the likely causes, before decoding and before any file is written."""

from __future__ import annotations

import contextlib

import pytest
import torch

from ltx2_core import stages
from ltx2_core.__main__ import main
from ltx2_core.demo import demo_models
from ltx2_core.errors import NonFiniteError
from ltx2_core.pipeline import Generation, Request, generate
from ltx2_core.sampling import GuidanceParams

SMALL = dict(prompt="a red car in the rain", width=128, height=64, frames=9, steps=2)


@pytest.fixture(scope="module")
def models():
    return demo_models("2.0")


@contextlib.contextmanager
def poisoned(module: torch.nn.Module, name: str, value: float = float("nan")):
    """One element of one weight set to `value` for the duration; restored from a copy afterwards."""
    weight = module.get_parameter(name)
    original = weight.detach().clone()
    with torch.no_grad():
        weight.view(-1)[0] = value
    try:
        yield
    finally:
        with torch.no_grad():
            weight.copy_(original)


@pytest.fixture()
def no_decoding(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("non-finite latents reached the decoders")

    monkeypatch.setattr(stages, "decode_video", refuse)
    monkeypatch.setattr(stages, "decode_audio", refuse)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("mode", ["one-stage", "two-stage"])
def test_a_damaged_transformer_weight_stops_before_decoding(models, no_decoding, mode, value):
    with poisoned(models.transformer, "transformer_blocks.0.ff.net.2.weight", value), \
            pytest.raises(NonFiniteError) as error:
        generate(Request(**SMALL, mode=mode), models)
    message = str(error.value)
    stage = "stage 1" if mode == "two-stage" else "denoise"
    assert message.startswith(f"{stage}: the video latents and the audio latents hold NaN or infinite values")
    assert "checkpoint holds NaN/inf weights" in message and "float16" in message
    assert "Nothing was decoded or written." in message


def test_a_damaged_distilled_lora_stops_after_stage_two(models, no_decoding):
    lora = models.distilled_lora
    target = next(iter(lora.pairs))
    broken = lora._replace(pairs={**lora.pairs, target: lora.pairs[target]._replace(
        up=torch.full_like(lora.pairs[target].up, float("nan")))})
    with pytest.raises(NonFiniteError, match=r"^stage 2: .*LoRA holds NaN/inf values"):
        generate(Request(**SMALL, mode="two-stage"), models._replace(distilled_lora=broken))


def test_a_damaged_text_encoder_stops_before_sampling(models, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("non-finite prompt embeddings reached the sampler")

    monkeypatch.setattr(stages, "denoise", refuse)
    gemma = models.prompt_encoder.gemma
    name = next(n for n, p in gemma.named_parameters() if p.dim() == 2 and "embed" not in n)
    with poisoned(gemma, name), pytest.raises(NonFiniteError) as error:
        generate(Request(**SMALL), models)
    message = str(error.value)
    assert message.startswith("prompt encoding: the positive prompt's video context")
    assert "negative prompt's" in message and "Gemma ran in float16" in message


def test_a_damaged_decoder_stops_before_the_frames(models):
    with poisoned(models.decoders.video, "conv_out.conv.weight"), \
            pytest.raises(NonFiniteError, match=r"^decoding: the decoded video hold.*VAE.*Nothing was written"):
        generate(Request(**SMALL), models)


def test_a_float16_overflow_is_reported_like_damaged_weights(no_decoding):
    """Weights far too large for float16's range (max 65504) overflow in the first matmuls."""
    models = demo_models("2.0", dtype=torch.float16)
    with torch.no_grad():
        models.transformer.patchify_proj.weight.mul_(1e4)
    neutral = GuidanceParams(stg=0.0, modality=1.0)
    with pytest.raises(NonFiniteError, match="a float16 run overflowed"):
        generate(Request(**SMALL, video_guidance=neutral, audio_guidance=neutral), models)


def test_the_command_line_writes_no_mp4(models, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("ltx2_core.demo.demo_models", lambda *args, **kwargs: models)
    output = tmp_path / "nan.mp4"
    with poisoned(models.transformer, "proj_out.weight"):
        status = main(["generate", "--steps", "2", "--frames", "9", "--no-progress", "--output", str(output)])
    captured = capsys.readouterr()
    assert status == 2 and "error: denoise: the video latents" in captured.err
    assert "wrote" not in captured.out and list(tmp_path.iterdir()) == []


def test_saving_non_finite_media_never_says_clamp(tmp_path):
    frames = torch.rand(9, 64, 96, 3)
    frames[4, 10, 10] = float("nan")
    result = Generation(frames, torch.zeros(2, 4800), 24000, 24.0)
    with pytest.raises(NonFiniteError, match="frames: 3 NaN and 0 infinite values") as error:
        result.save(tmp_path / "out.mp4")
    assert "clamp" not in str(error.value) and list(tmp_path.iterdir()) == []
