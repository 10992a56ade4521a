"""ComfyUI's own LTX-2 MODEL and CONDITIONING in our sampler, in the shared ComfyUI 0.26.0: Load Checkpoint (with
and without LoraLoaderModelOnly) -> CFGGuider -> LTX-2 SamplerCustomAdvanced (fast) gives the latent our own loader
(and LTX-2 LoRA Loader) -> LTX-2 Sampler gives from the same file, seed, sigmas and CFG. The prompts are LTX-2 Text
Encode's native CONDITIONING outputs, and (node 54) ComfyUI's own LTXAVTextEncoderLoader + CLIPTextEncode +
LTXVConditioning (the test server's tiny_native_text folder sets its hard-coded Gemma sizes to the tiny file's).
The latents are split by LTXVSeparateAVLatent and written by SaveLatent (plain tensors), then read here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from ltx2_core.model.transformer import LTX2Transformer
from support.configs import RELEASED_2_0, RELEASED_2_3, RELEASED_2_5, released_transformer_configs

from .conftest import ROOT, TINY, _comfyui

SIGMAS = "1.0, 0.6, 0.25, 0.0"
PROMPT, NEGATIVE = "A red car drives through the rain at night.", "blurry"
SEED, CFG, LORA_STRENGTH = 7, 3.0, 0.5


def _guidance() -> dict:
    scales = {"cfg": CFG, "stg": 0.0, "rescale": 0.0, "modality": 1.0, "stg_blocks": "auto"}
    return {"model": ["1", 0], **scales, **{f"audio_{k}": v for k, v in scales.items()}}


def _save(node: str, source: str, prefix: str) -> dict:
    return {f"{node}s": {"class_type": "LTXVSeparateAVLatent", "inputs": {"av_latent": [source, 0]}},
            f"{node}v": {"class_type": "SaveLatent", "inputs": {"samples": [f"{node}s", 0],
                                                                "filename_prefix": f"{prefix}_video"}},
            f"{node}a": {"class_type": "SaveLatent", "inputs": {"samples": [f"{node}s", 1],
                                                                "filename_prefix": f"{prefix}_audio"}}}


def _graph() -> dict:
    ckpt = TINY["native_checkpoint"]
    graph = {
        "1": {"class_type": "LTX2CheckpointLoader", "inputs": {"ckpt_name": ckpt, "weight_dtype": "auto",
                                                               "device": "default", "fp8": "auto", "memory": "auto"}},
        "2": {"class_type": "LTX2TextEncoderLoader", "inputs": {"text_encoder": TINY["text_encoder"],
                                                                "model": ["1", 0], "device": "default",
                                                                "offload": True}},
        "3": {"class_type": "LTX2TextEncode", "inputs": {"text_encoder": ["2", 0], "prompt": PROMPT,
                                                         "negative_prompt": NEGATIVE}},
        "4": {"class_type": "LTX2EmptyLatent", "inputs": {"width": 96, "height": 64, "frames": 9, "fps": 24.0}},
        "5": {"class_type": "LTX2Guidance", "inputs": _guidance()},
        "20": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ckpt}},
        "21": {"class_type": "RandomNoise", "inputs": {"noise_seed": SEED}},
        "22": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "23": {"class_type": "ManualSigmas", "inputs": {"sigmas": SIGMAS}},
        "30": {"class_type": "LTX2LoraLoader", "inputs": {"model": ["1", 0], "lora_name": TINY["lora"],
                                                          "strength": LORA_STRENGTH}},
        "40": {"class_type": "LoraLoaderModelOnly", "inputs": {"model": ["20", 0], "lora_name": TINY["lora"],
                                                               "strength_model": LORA_STRENGTH}},
    }
    for ours, native, model, native_model in (("6", "24", "1", "20"), ("31", "41", "30", "40")):
        graph[ours] = {"class_type": "LTX2Sampler", "inputs": {
            "model": [model, 0], "conditioning": ["3", 0], "latent": ["4", 0], "seed": SEED, "steps": 3,
            "schedule": "ltx2", "guidance": ["5", 0], "sigmas": SIGMAS, "compile": False, "cuda_graphs": False}}
        graph[native + "g"] = {"class_type": "CFGGuider", "inputs": {"model": [native_model, 0], "positive": ["3", 1],
                                                                     "negative": ["3", 2], "cfg": CFG}}
        graph[native] = {"class_type": "LTX2SamplerCustomAdvanced", "inputs": {
            "noise": ["21", 0], "guider": [native + "g", 0], "sampler": ["22", 0], "sigmas": ["23", 0],
            "latent_image": ["4", 0]}}
        graph |= _save(ours + "o", ours, f"ours{ours}") | _save(native + "o", native, f"native{native}")
    # ComfyUI's own text path (test server: tiny_native_text sets its Gemma sizes) -> CFGGuider -> ours
    graph |= {
        "50": {"class_type": "LTXAVTextEncoderLoader", "inputs": {"text_encoder": TINY["text_encoder"],
                                                                  "ckpt_name": ckpt, "device": "default"}},
        "51": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["50", 0], "text": PROMPT}},
        "52": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["50", 0], "text": NEGATIVE}},
        "53": {"class_type": "LTXVConditioning", "inputs": {"positive": ["51", 0], "negative": ["52", 0],
                                                            "frame_rate": 24.0}},
        "54g": {"class_type": "CFGGuider", "inputs": {"model": ["20", 0], "positive": ["53", 0],
                                                      "negative": ["53", 1], "cfg": CFG}},
        "54": {"class_type": "LTX2SamplerCustomAdvanced", "inputs": {
            "noise": ["21", 0], "guider": ["54g", 0], "sampler": ["22", 0], "sigmas": ["23", 0],
            "latent_image": ["4", 0]}},
    } | _save("54o", "54", "native54")
    # ComfyUI's quantised layouts: its own layer ops inside our loop (60, 70) against our loader on the
    # dequantised twin files (61, 71)
    for node, name in (("60", "native_int8"), ("70", "native_fp8")):
        graph[node + "l"] = {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": TINY[name]}}
        graph[node + "g"] = {"class_type": "CFGGuider", "inputs": {"model": [node + "l", 0], "positive": ["3", 1],
                                                                   "negative": ["3", 2], "cfg": CFG}}
        graph[node] = {"class_type": "LTX2SamplerCustomAdvanced", "inputs": {
            "noise": ["21", 0], "guider": [node + "g", 0], "sampler": ["22", 0], "sigmas": ["23", 0],
            "latent_image": ["4", 0]}}
        twin = str(int(node) + 1)
        graph[twin + "l"] = {"class_type": "LTX2CheckpointLoader", "inputs": {
            "ckpt_name": "twin-" + TINY[name], "weight_dtype": "auto", "device": "default", "fp8": "auto",
            "memory": "auto"}}
        graph[twin] = {"class_type": "LTX2Sampler", "inputs": {
            "model": [twin + "l", 0], "conditioning": ["3", 0], "latent": ["4", 0], "seed": SEED, "steps": 3,
            "schedule": "ltx2", "guidance": ["5", 0], "sigmas": SIGMAS, "compile": False, "cuda_graphs": False}}
        graph |= _save(node + "o", node, f"native{node}") | _save(twin + "o", twin, f"ours{twin}")
    return graph


def test_native_model_and_lora_in_our_sampler_equal_our_loader(comfyui, tmp_path):
    workflow = tmp_path / "native_model.api.json"
    workflow.write_text(json.dumps(_graph()))
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "ltx2_client.py"), str(workflow), "--server",
                          comfyui.url, "--out", str(tmp_path / "out"), "--timeout", "600"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]

    def latent(prefix: str) -> torch.Tensor:
        (file,) = (comfyui.base / "output").glob(f"{prefix}_*.latent")
        return load_file(str(file))["latent_tensor"]

    for ours, native in (("6", "24"), ("31", "41"), ("6", "54"), ("61", "60"), ("71", "70")):
        for part in ("video", "audio"):
            a, b = latent(f"ours{ours}_{part}"), latent(f"native{native}_{part}")
            assert a.shape == b.shape and a.abs().max() > 0.1
            if native == "60":
                # ComfyUI's int8 op (its own matmul, activations quantised too) against our dequantised twin:
                # 0.5 % relative (L2) measured on CPU; that it differs at all shows ComfyUI's op ran, not a copy
                error = ((b - a).norm() / a.norm()).item()
                assert 1e-5 < error < 0.02, f"{part}: int8 relative error {error}"
                continue
            # the same blocks on the same weights, ComfyUI's Linear layers (its LoRA patches, its fp8 dequantising
            # op) in ours: 0.0 measured (CPU); ComfyUI's own text encoding (54) differs from ours by 1e-6 in the
            # contexts: 2.6e-6 measured
            torch.testing.assert_close(b, a, rtol=0, atol=1e-4, msg=f"{part}: ours {ours}, native {native}")
    # the LoRA changes the result: the native LoRA loader's patches reached our loop
    assert (latent("native41_video") - latent("native24_video")).abs().max() > 1e-3


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_released_sizes_adopt_comfyui_model_on_meta(version, tmp_path):
    """ComfyUI's own LTXAVModel at the released size (on `meta`: no memory), as Load Checkpoint builds it from the
    release's metadata: our transformer takes every one of its tensors (2.0, 2.3: every Linear is ComfyUI's module);
    LTX-2.5, which ComfyUI 0.26.0 builds with feed-forward biases the release lacks, is refused naming our loaders."""
    path, python = _comfyui()
    section = {"2.0": RELEASED_2_0, "2.3": RELEASED_2_3, "2.5": RELEASED_2_5}[version]
    out = tmp_path / "adopted.json"
    run = subprocess.run([str(python), str(ROOT / "tests" / "e2e" / "native_released_meta.py"), str(ROOT),
                          json.dumps(section), str(out)], cwd=path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    if version == "2.5":
        assert "LTX-2 Model Loader" in result["error"] and "bias" in result["error"]
        return
    config = released_transformer_configs()[version]
    with torch.device("meta"):
        ours = LTX2Transformer(config)
    linears = sum(isinstance(m, torch.nn.Linear) for m in ours.modules())
    assert result == {"native": len(ours.state_dict()), "ours": len(ours.state_dict()), "linears": linears,
                      "bytes": result["bytes"]}
    assert result["bytes"] > 30e9  # the 19B / 22B DiT in bf16 (it is ComfyUI's: nothing was allocated)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_without_metadata_comfyui_builds_the_2_0_structure(version, tmp_path):
    """What ComfyUI-GGUF's UnetLoaderGGUF gets from ComfyUI 0.26.0 for an LTX-2 GGUF (tensors, no `config`
    metadata): the structure detected from the keys alone is 2.0's, so a 2.0 GGUF fits it and a 2.3 one does not (its
    prompt AdaLN and gates have no place, its 9-row tables and wider AdaLN projections mismatch); the pack's LTX-2
    Model Loader (separate files) reads either (docs/small_cards/gguf.md)."""
    path, python = _comfyui()
    out = tmp_path / "detected.json"
    run = subprocess.run([str(python), str(ROOT / "tests" / "e2e" / "detect_without_metadata.py"), str(ROOT), version,
                          str(out)], cwd=path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["detected"]["image_model"] == "ltxav" and "apply_gated_attention" not in result["detected"]
    if version == "2.0":
        assert result["no_place"] == result["absent"] == result["mismatched"] == []
        return
    assert "prompt_adaln_single.linear.weight" in result["no_place"]
    assert "transformer_blocks.0.attn1.to_gate_logits.weight" in result["no_place"]
    assert ["adaln_single.linear.weight", [36864, 4096], [24576, 4096]] in result["mismatched"]
    assert ["transformer_blocks.0.scale_shift_table", [9, 4096], [6, 4096]] in result["mismatched"]
