"""Tiny real model files and the models loaded from them by the loader nodes, shared by the node tests."""

from __future__ import annotations

import pytest

from support.model_files import write_lora, write_upsampler
from support.node_calls import node


@pytest.fixture(scope="session")
def files(tiny_checkpoints, gemma_files, tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {"checkpoint": str(tiny_checkpoints["2.0"]), "gemma": str(gemma_files[0]),
            "upsampler": str(write_upsampler(root / "up.safetensors")),
            "distilled": str(write_lora(root / "distilled.safetensors", seed=1)),
            "style": str(write_lora(root / "style.safetensors", seed=2))}


@pytest.fixture(scope="session")
def loaded(files):
    (model,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu")
    (encoder,) = node("LTX2TextEncoderLoader", files["gemma"], model, "cpu", False)
    conditioning = node("LTX2TextEncode", encoder, "a red car in the rain", "blurry")[0]
    (guidance,) = node("LTX2Guidance", model, cfg=3.0, stg=1.0, rescale=0.7, modality=3.0, stg_blocks="auto",
                       audio_cfg=7.0, audio_stg=1.0, audio_rescale=0.7, audio_modality=3.0, audio_stg_blocks="1")
    return model, encoder, conditioning, guidance
