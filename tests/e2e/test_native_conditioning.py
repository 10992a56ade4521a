"""ComfyUI's own LTX-2 text path against ours on the same weights: LTXAVTextEncoderLoader + CLIPTextEncode +
LTXVConditioning of a prompt on the tiny Gemma 3 file and the tiny native 2.3 bundle (run in ComfyUI's Python by
native_text_encode.py, whose test-only shim sets ComfyUI's hard-coded Gemma 3 12B sizes to the tiny ones), converted
by `from_native` with the checkpoint's connectors, equals our LTX-2 encoding of the prompt; and equals what the
native model's own connectors make of it, which take our connector outputs (`to_native`) as they are.

Tolerance 1e-5 (absolute and relative, fp32, values of order 1): measured on CPU, ComfyUI's Gemma and projection
against ours differ by 1.3e-6 in the features, the embeddings by 9.5e-7 (two implementations of the same float32
arithmetic; the positions agree: both pad on the left to 1024 tokens and number the pads too)."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from safetensors import safe_open

from ltx2_core.loader.text_weights import load_prompt_encoder
from nodes.native_conditioning import MIN_TOKENS, UNPROCESSED, from_native, to_native
from support.configs import TINY_GEMMA, TINY_GEMMA_FEATURES
from support.gemma import write_comfyui_file
from support.native_files import write_native_checkpoint

from .conftest import ROOT, _comfyui

PROMPT = "A cat walks along the beach at sunset while waves roll in."
TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}


@pytest.fixture(scope="module")
def native_run(tmp_path_factory):
    """(our prompt encoder, the native CONDITIONING, the native model's text context) for PROMPT at 24 fps."""
    path, python = _comfyui()
    root = tmp_path_factory.mktemp("native_text")
    (root / "text_encoders").mkdir()
    (root / "checkpoints").mkdir()
    gemma = write_comfyui_file(root / "text_encoders" / "tiny-gemma-3.safetensors")
    checkpoint = write_native_checkpoint(root / "checkpoints" / "tiny-ltx-2.3-native.safetensors")
    encoder = load_prompt_encoder(gemma, checkpoint)
    config = encoder.projection.config
    sizes = {"gemma": TINY_GEMMA, "features": TINY_GEMMA_FEATURES, "video": config.video.width,
             "audio": config.audio.width}
    out = root / "native.safetensors"
    run = subprocess.run([str(python), str(ROOT / "tests" / "e2e" / "native_text_encode.py"), str(gemma),
                          str(checkpoint), PROMPT, "24", json.dumps(sizes), str(out)],
                         cwd=path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    with safe_open(str(out), "pt") as file:
        meta = file.metadata()
        cond, context = file.get_tensor("cond"), file.get_tensor("context")
    assert json.loads(meta["dtypes"]) == {"gemma": "torch.float32", "projection": "torch.float32"}
    assert json.loads(meta["passthrough"]) is True  # connector outputs, unflagged, are used as they are
    return encoder, [[cond, json.loads(meta["options"])]], context


def test_comfyui_encoding_through_from_native_equals_ours(native_run):
    encoder, native, _ = native_run
    cond, options = native[0]
    real = int(encoder.tokenizer([PROMPT]).attention_mask.sum())
    config = encoder.projection.config
    assert options == {"pooled_output": None, UNPROCESSED: True, "frame_rate": 24.0}
    assert cond.shape == (1, real, config.video.width + config.audio.width)  # padding trimmed
    connectors = (encoder.projection.video_connector, encoder.projection.audio_connector)
    got, frame_rate = from_native(native, connectors, config.video.width)
    ours = encoder.encode_batch([PROMPT])
    assert frame_rate == 24.0 and got.video.shape == ours.video.shape == (1, MIN_TOKENS, config.video.width)
    torch.testing.assert_close(got.video, ours.video, **TOLERANCE)
    torch.testing.assert_close(got.audio, ours.audio, **TOLERANCE)


def test_native_model_connectors_equal_from_native(native_run):
    encoder, native, context = native_run
    config = encoder.projection.config
    connectors = (encoder.projection.video_connector, encoder.projection.audio_connector)
    got, frame_rate = from_native(native, connectors, config.video.width)
    ours_as_native = to_native(got, frame_rate)[0][0]
    assert context.shape == ours_as_native.shape
    torch.testing.assert_close(ours_as_native, context, **TOLERANCE)
