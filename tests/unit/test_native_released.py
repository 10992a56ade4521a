"""bench/native_released.py, the GPU inputs of bench/native_swap.py without a released checkpoint: the transformer file
carries the released metadata section cut to its blocks and our transformer's every tensor under the official keys
(what ComfyUI's Load Diffusion Model detects the model from); the audio latent is LTXVEmptyLatentAudio's for the
released audio VAE; EasyCache's closing log line is read."""

from __future__ import annotations

import json
import logging

import torch
from safetensors import safe_open
from support.bench_modules import bench_module

from ltx2_core import TransformerConfig
from ltx2_core.model.transformer import LTX2Transformer


def test_the_file_is_one_released_block_under_the_official_keys(tmp_path):
    released = bench_module("native_released")
    path = released.write_released_transformer(tmp_path, "2.3", 1, torch.device("cpu"))
    with safe_open(str(path), "pt") as file:
        metadata, keys = file.metadata(), set(file.keys())
        dtypes = {file.get_slice(key).get_dtype() for key in keys}
    section = json.loads(metadata["config"])["transformer"]
    assert metadata["model_version"] == "2.3.0" and section["num_layers"] == 1
    config = TransformerConfig.from_metadata(section, metadata["model_version"])
    assert (config.video.heads * config.video.head_dim, config.num_layers) == (4096, 1)  # released width, 1 block
    with torch.device("meta"):
        expected = {"model.diffusion_model." + key for key in LTX2Transformer(config).state_dict()}
    assert keys == expected and dtypes == {"BF16"}


def test_the_audio_latent_and_the_skipped_steps():
    released = bench_module("native_released")
    latent = released.released_audio_latent(121, 24, torch.device("cpu"))
    assert latent["type"] == "audio" and latent["samples"].shape == (1, 8, 127, 16)  # ⌈121 / 24 · 25⌉ = 127
    with released.SkippedSteps() as log:
        logging.getLogger().info("EasyCache - skipped 3/8 steps (1.60x speedup).")
        logging.getLogger("other").info("unrelated")
    logging.getLogger().info("EasyCache - skipped 5/8 steps (2.67x speedup).")  # after: not collected
    assert log.runs == [(3, 8)]
