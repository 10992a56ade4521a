"""GGUF transformer files in ComfyUI-GGUF's layout: loaded with block-type linears kept quantised, the forward equal
to the model of the dequantised weights; bad files refused before any model work, naming the file and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from support.gguf_files import dequantised as _dequantised
from support.gguf_files import write_gguf

from ltx2_core import TransformerConfig, load_transformer
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.errors import CheckpointError, CorruptCheckpointError, UnsupportedQuantizationError
from ltx2_core.loader import gguf_file
from ltx2_core.quant.gguf import GGUF_FORMAT, GGUFLinear
from ltx2_core.quant.registry import quantised_modules

T = gguf.GGMLQuantizationType


@pytest.mark.parametrize("version, quant, prefix", [("2.3", T.Q4_K, ""), ("2.5", T.Q8_0, gguf_file.PREFIX),
                                                    ("2.3", T.Q5_0, "")])
def test_a_gguf_transformer_keeps_its_blocks_and_runs_as_the_dequantised_model(tmp_path, version, quant, prefix):
    config = TransformerConfig.tiny(version)
    source = demo_transformer(config)
    path = tmp_path / "ltx-tiny.gguf"
    beside = {"vae.decoder.conv_in.conv.bias": torch.randn(32), "text_embedding_projection.x.weight": torch.randn(8, 32)}
    types = write_gguf(path, source.state_dict() | beside, quant, prefix=prefix)  # a bundle's other parts beside
    model = load_transformer(path, dtype=torch.float32)
    assert model.config == config  # inferred from the shapes and the key set (the file has no config)
    layers = quantised_modules(model)
    blocky = {n[: -len(".weight")] for n, t in types.items() if t not in (T.F32, T.F16) and n not in beside}
    assert set(layers) == blocky and blocky and all(q.format is GGUF_FORMAT for q in layers.values())
    assert all(m.weight.dtype == torch.uint8 for m in model.modules() if isinstance(m, GGUFLinear))
    assert {m.kind.name for m in model.modules() if isinstance(m, GGUFLinear)} >= {quant.name}
    reference = demo_transformer(config)
    weights = {k[len(prefix):]: v for k, v in _dequantised(path).items()}
    reference.load_state_dict({k: v for k, v in weights.items() if k not in beside})
    inputs = demo_inputs(model, text_tokens=7)
    for got, want in zip(model(*inputs), reference(*inputs)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    error = max((a - b).abs().max() for a, b in zip(reference(*inputs), source(*inputs)))
    assert error > 0  # the file's weights are quantised: the comparison above is not with the source weights


def test_a_gguf_without_gates_takes_its_config_from_the_config_field(tmp_path):
    config = TransformerConfig.tiny("2.0")
    metadata = {"num_attention_heads": 2, "attention_head_dim": 8, "cross_attention_dim": 16,
                "audio_num_attention_heads": 2, "audio_attention_head_dim": 4, "audio_cross_attention_dim": 8,
                "num_layers": 3, "caption_channels": 12, "rope_type": "split", "frequencies_precision": "float64",
                "av_ca_timestep_scale_multiplier": 1000}
    path = tmp_path / "ltx-2.0.gguf"
    write_gguf(path, demo_transformer(config).state_dict(), T.Q8_0,
               fields={"config": json.dumps({"transformer": metadata}), "model_version": "2.0.0"})
    model = load_transformer(path, dtype=torch.float32)
    assert model.config == config
    assert quantised_modules(model)


def _refused(path, error, *words):
    with pytest.raises(error) as caught:
        load_transformer(path)
    message = str(caught.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message


def test_bad_gguf_files_are_refused_naming_the_file_the_problem_and_the_fix(tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr(gguf_file, "LTX2Transformer", lambda *a: built.append(a))  # no model work on refusal
    state = demo_transformer(TransformerConfig.tiny("2.3")).state_dict()
    good = tmp_path / "good.gguf"
    write_gguf(good, state, T.Q8_0)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size - 1000])
    _refused(truncated, CorruptCheckpointError, "truncated", "download it again")
    header_only = tmp_path / "header-only.gguf"
    header_only.write_bytes(good.read_bytes()[:200])
    _refused(header_only, CorruptCheckpointError, "download it again")

    flux = tmp_path / "flux1-dev-Q4_K.gguf"
    write_gguf(flux, {"double_blocks.0.img_attn.proj.weight": torch.randn(32, 64), "img_in.bias": torch.randn(32)},
               arch="flux")
    _refused(flux, CheckpointError, "another model family", "'flux'", "LTX-2 transformer GGUF")
    wan = tmp_path / "wan-no-arch.gguf"  # sd.cpp style: no architecture, the key set tells
    write_gguf(wan, {"blocks.0.self_attn.norm_q.weight": torch.randn(32), "head.modulation": torch.randn(2, 32)},
               arch=None)
    _refused(wan, CheckpointError, "another model family", "LTX-2 transformer GGUF")

    text = tmp_path / "gemma-3-12b-it-Q4_K_M.gguf"
    write_gguf(text, {"token_embd.weight": torch.randn(8, 64), "blk.0.attn_q.weight": torch.randn(64, 64)},
               arch="gemma3")
    _refused(text, CheckpointError, "text encoder", "text encoder (safetensors)")

    unknown = tmp_path / "iq2.gguf"
    writer = gguf.GGUFWriter(unknown, "ltxv")
    size = gguf.GGML_QUANT_SIZES[T.IQ2_XXS]
    writer.add_tensor("transformer_blocks.0.attn1.to_q.weight", np.zeros((16, size[1]), np.uint8),
                      raw_dtype=T.IQ2_XXS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    _refused(unknown, UnsupportedQuantizationError, "IQ2_XXS", "does not dequantise", "Q8_0")

    raw = bytearray(good.read_bytes())  # a type id no ggml version defines, in the first tensor's entry
    name = next(iter(state)).encode()
    at = raw.index(name) + len(name)
    dims = int.from_bytes(raw[at:at + 4], "little")
    raw[at + 4 + 8 * dims: at + 8 + 8 * dims] = (200).to_bytes(4, "little")
    odd = tmp_path / "odd-type.gguf"
    odd.write_bytes(bytes(raw))
    _refused(odd, UnsupportedQuantizationError, "unknown ggml type", "Q8_0")
    assert not built


def test_model_files_take_a_gguf_as_the_transformer_and_identify_tells_it(tmp_path):
    from ltx2_core.loader.file_kinds import file_kind
    from ltx2_core.loader.identify import check_kind
    from ltx2_core.model_files import ModelFiles

    config = TransformerConfig.tiny("2.3")
    path = tmp_path / "ltx-2.3-tiny-Q8_0.gguf"
    write_gguf(path, demo_transformer(config).state_dict(), T.Q8_0)
    assert file_kind(path) == ("transformer", "2.3", "GGUF")
    check_kind(path, "transformer")
    with pytest.raises(CheckpointError, match="not a checkpoint; load it from diffusion_models"):
        check_kind(path, "checkpoint")
    files = ModelFiles(checkpoint=str(path))
    assert files.split and files.transformer_config() == config  # the VAEs and text encoder: separate files
    model = files.load_transformer(dtype=torch.float32)
    assert quantised_modules(model) and model.config == config
    with pytest.raises(ValueError, match="LTX-2.3 transformer without the VAEs") as caught:
        files.check("one-stage")  # a generation's pre-flight names the files it needs beside (test_gguf_generation)
    assert path.name in str(caught.value) and "--vae and --audio-vae" in str(caught.value)
    flux = tmp_path / "flux.gguf"
    write_gguf(flux, {"double_blocks.0.img_attn.proj.weight": torch.randn(32, 64)}, arch="flux")
    with pytest.raises(CheckpointError, match="another model family"):
        check_kind(flux, "transformer")


def test_what_a_gguf_does_not_do_yet_is_refused_naming_the_safetensors_checkpoint(tmp_path):
    from ltx2_core.errors import UnsupportedQuantizationError

    path = tmp_path / "ltx.gguf"
    write_gguf(path, demo_transformer(TransformerConfig.tiny("2.3")).state_dict(), T.Q8_0)
    with pytest.raises(ValueError, match="without tensor parallelism or an fp8 mode"):
        load_transformer(path, fp8="dequantize")
    layer = next(m for m in load_transformer(path).modules() if isinstance(m, GGUFLinear))
    with pytest.raises(UnsupportedQuantizationError, match="safetensors checkpoint"):
        GGUF_FORMAT.shard_scales(layer)
    with pytest.raises(UnsupportedQuantizationError, match="added per call"):  # blocks are never requantised
        GGUF_FORMAT.fuse_(layer, torch.zeros(layer.out_features, layer.in_features))


def test_a_gguf_transformer_takes_loras_beside_its_blocks(tmp_path, monkeypatch):
    """`load_transformer(gguf, loras=...)`: the LoRA is checked against the file's config before any weight is read,
    attached beside the GGUF layers (their bytes as in the file; the file's F16 layers load plain and are fused) and
    the forward equals the model of the
    dequantised weights with the LoRA fused (fp32, 1e-5); a LoRA that does not fit is refused naming the file."""
    from ltx2_core.demo import demo_lora
    from ltx2_core.loader import transformer as transformer_loader
    from ltx2_core.loader.lora import Lora, LoraError, LoraPair, fuse_loras
    from ltx2_core.quant import low_rank

    config = TransformerConfig.tiny("2.3")
    source = demo_transformer(config)
    path = tmp_path / "ltx.gguf"
    write_gguf(path, source.state_dict(), T.Q8_0)
    lora = demo_lora(source, seed=5)
    plain = load_transformer(path, dtype=torch.float32)
    model = load_transformer(path, dtype=torch.float32, loras=[(lora, 0.6)])
    layers = quantised_modules(model)
    targeted = {name for name in layers if name + ".weight" in lora.pairs}
    assert targeted and all(low_rank.attached(layers[name].module, "lora") is not None for name in targeted)
    stored, loaded = model.state_dict(), plain.state_dict()  # the quantised layers' bytes as in the file
    assert all(torch.equal(stored[f"{name}.weight"], loaded[f"{name}.weight"]) for name in layers)
    reference = demo_transformer(config)
    reference.load_state_dict(_dequantised(path))
    fuse_loras(reference, [(lora, 0.6)])
    inputs = demo_inputs(model, text_tokens=7)
    for got, want in zip(model(*inputs), reference(*inputs)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    wrong = Lora("wrong", {"transformer_blocks.0.ff.net.2.weight": LoraPair(torch.zeros(2, 32), torch.zeros(16, 2),
                                                                             1.0)})  # the layer has 64 inputs
    monkeypatch.setattr(transformer_loader, "load_gguf_transformer", lambda *a, **k: pytest.fail("weights read"))
    with pytest.raises(LoraError, match="does not fit this model"):
        load_transformer(path, loras=[(wrong, 1.0)])
