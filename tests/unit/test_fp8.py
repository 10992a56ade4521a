"""fp8 checkpoints: each layout loads with its block linears kept in float8_e4m3fn, runs as the dequantised model
does, takes LoRAs by dequantise-add-requantise (and gives the weights back exactly), and the formats this package
does not run are refused naming the ones it does."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_core import TransformerConfig, load_lora, load_transformer
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.lora import fuse_loras, fused_loras
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.quant.fp8 import FP8, FP8Linear, dequantize, fp8_modules, quantize
from ltx2_core.sampling import GuidanceParams, ltx2_sigmas
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings
from support.fp8_files import LAYOUTS, PREFIX, quantised_layers, write_fp8_checkpoint
from support.model_files import write_lora
from support.transformer25 import FILE_NAME, write_transformer25


@pytest.fixture(scope="module")
def fp8_files(tiny_checkpoints, tmp_path_factory):
    root = tmp_path_factory.mktemp("fp8")
    return {layout: write_fp8_checkpoint(tiny_checkpoints["2.0"], root / f"{layout}.safetensors", layout)
            for layout in LAYOUTS}


@pytest.fixture(scope="module")
def fp8_files25(tmp_path_factory):
    """Each fp8 layout of an LTX-2.5 transformer file (the DiT and its connectors alone, bias-free feed-forwards)."""
    root = tmp_path_factory.mktemp("fp8-25")
    config = TransformerConfig.tiny("2.5")
    source = write_transformer25(root / FILE_NAME, demo_transformer(config, seed=3).state_dict(), config)
    return {layout: write_fp8_checkpoint(source, root / f"{layout}.safetensors", layout) for layout in LAYOUTS}


def _outputs(model):
    return model(*demo_inputs(model, text_tokens=7))


@pytest.mark.parametrize("version", ["2.0", "2.5"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_keeps_fp8_storage_and_runs_as_the_dequantised_model(request, layout, version):
    fp8_files = request.getfixturevalue("fp8_files" if version == "2.0" else "fp8_files25")
    model = load_transformer(fp8_files[layout], dtype=torch.float32)
    assert model.config.version == version
    with safe_open(str(fp8_files[layout]), framework="pt") as f:
        expected = {k[len(PREFIX):] for k in quantised_layers(f.keys())}
    fp8 = fp8_modules(model)
    assert set(fp8) == expected and all(m.weight.dtype == FP8 for m in fp8.values())
    assert all((m.input_scale is not None) == (layout == "official") for m in fp8.values())
    assert model.patchify_proj.weight.dtype == torch.float32  # the rest takes the requested dtype
    reference = load_transformer(fp8_files[layout], dtype=torch.float32, fp8="dequantize")
    assert not fp8_modules(reference)
    for got, want in zip(_outputs(model), _outputs(reference)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)  # the same products, one layer at a time


def test_fp8_halves_the_weight_bytes_of_the_quantised_layers(fp8_files):
    def block_linear_bytes(model):
        return sum(p.numel() * p.element_size() for name, p in model.named_parameters()
                   if name.rsplit(".", 1)[0] in fp8_modules(fp8) and name.endswith(".weight"))

    fp8 = load_transformer(fp8_files["official"], dtype=torch.bfloat16)
    bf16 = load_transformer(fp8_files["official"], dtype=torch.bfloat16, fp8="dequantize")
    assert block_linear_bytes(fp8) * 2 == block_linear_bytes(bf16)


def test_the_fp8_tensor_core_path_multiplies_the_quantised_operands():
    """torch._scaled_mm (forced here: PyTorch has a CPU kernel) equals the fp32 product of the dequantised weight and
    the input quantised per tensor, with the file's input scale or a dynamic one."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    x = torch.randn(3, 5, 64)
    for input_scale in (None, 0.01):
        layer = FP8Linear.from_linear(linear)
        if input_scale is not None:
            layer.input_scale = torch.tensor(input_scale)
        layer.scaled_mm = True
        scale = torch.tensor(input_scale) if input_scale is not None else x.abs().amax() / 448
        xq = dequantize((x / scale).clamp(-448, 448).to(FP8), scale, torch.float32)
        want = xq @ layer.dequantized(torch.float32).T + linear.bias
        torch.testing.assert_close(layer(x), want, atol=1e-4, rtol=1e-4)
    assert (FP8Linear.from_linear(linear)(x) - linear(x)).abs().max() < 0.05  # fp8 is close to the original


def test_a_lora_is_fused_by_dequantise_add_requantise_and_restored_exactly(fp8_files, tmp_path):
    lora = load_lora(write_lora(tmp_path / "lora.safetensors", seed=3))
    model = load_transformer(fp8_files["comfyui"], dtype=torch.float32)
    before = {name: (m.weight.clone(), m.weight_scale.clone()) for name, m in fp8_modules(model).items()}
    with fused_loras(model, [(lora, 0.7)]):
        name, layer = next(iter(fp8_modules(model).items()))
        pair = lora.pairs[name + ".weight"]
        q, scale = quantize(dequantize(*before[name], torch.float32) + 0.7 * pair.scale * pair.up @ pair.down)
        assert torch.equal(layer.weight.view(torch.uint8), q.view(torch.uint8))  # the same computation, exactly
        torch.testing.assert_close(layer.weight_scale, scale, atol=0, rtol=1e-6)
        assert not torch.equal(layer.weight_scale, before[name][1])  # a fresh scale
    for name, layer in fp8_modules(model).items():  # restored: pure copies back
        assert torch.equal(layer.weight.view(torch.uint8), before[name][0].view(torch.uint8))
        assert torch.equal(layer.weight_scale, before[name][1])
    fused_at_load = load_transformer(fp8_files["comfyui"], dtype=torch.float32, loras=[(lora, 0.7)])
    fuse_loras(model, [(lora, 0.7)])
    for got, want in zip(_outputs(fused_at_load), _outputs(model)):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


def test_quantize_at_load_turns_a_bf16_file_into_fp8_block_linears(tiny_checkpoints):
    model = load_transformer(tiny_checkpoints["2.0"], dtype=torch.float32, fp8="quantize")
    reference = load_transformer(tiny_checkpoints["2.0"], dtype=torch.float32)
    assert len(fp8_modules(model)) == (6 * 4 + 2 * 2) * model.config.num_layers  # q, k, v, out; FF in and out
    for got, want in zip(_outputs(model), _outputs(reference)):
        assert (got - want).abs().max() < 0.05 * want.abs().max()  # fp8 rounding only


def _rewrite(source, path, change):
    with safe_open(str(source), framework="pt") as f:
        tensors, metadata = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    change(tensors)
    save_file(tensors, str(path), metadata=metadata)
    return path


@pytest.mark.parametrize("what, change, message", [
    ("nvfp4", "comfy_quant", "quantised as nvfp4"),
    ("int8", "int8", "quantised as int8"),
    ("e5m2", "e5m2", "quantised as float8_e5m2"),
])
def test_formats_this_package_does_not_run_are_refused_naming_the_ones_it_does(tiny_checkpoints, fp8_files,
                                                                               tmp_path, what, change, message):
    layer = PREFIX + "transformer_blocks.0.attn1.to_q"
    if change == "comfy_quant":
        path = write_fp8_checkpoint(tiny_checkpoints["2.0"], tmp_path / "x.safetensors", "comfyui",
                                    formats={layer: "nvfp4"})
    elif change == "int8":
        path = _rewrite(tiny_checkpoints["2.0"], tmp_path / "x.safetensors",
                        lambda t: t.__setitem__(layer + ".weight", t[layer + ".weight"].to(torch.int8)))
    else:
        path = _rewrite(fp8_files["comfyui"], tmp_path / "x.safetensors",
                        lambda t: t.__setitem__(layer + ".weight", t[layer + ".weight"].float().to(torch.float8_e5m2)))
    with pytest.raises(UnsupportedQuantizationError, match=message) as error:
        load_transformer(path)
    assert "float8_e4m3fn" in str(error.value) and "official" in str(error.value)


def test_quantize_at_load_with_tensor_parallelism_is_refused_before_reading(tiny_checkpoints):
    with pytest.raises(ValueError, match="does not combine with tensor parallelism"):
        load_transformer(tiny_checkpoints["2.0"], fp8="quantize", parallelize=lambda model: {})


def test_comfy_quant_json_is_what_comfyui_writes(fp8_files):
    with safe_open(str(fp8_files["comfyui"]), framework="pt") as f:
        marker = f.get_tensor(PREFIX + "transformer_blocks.0.attn1.to_q.comfy_quant")
    assert marker.dtype == torch.uint8 and json.loads(marker.numpy().tobytes()) == {"format": "float8_e4m3fn"}


@pytest.fixture(scope="module")
def all_fp8(tiny_checkpoints, tmp_path_factory):
    """Every linear under the DiT's prefix in fp8, and the same file with those weights dequantised (no scales)."""
    root = tmp_path_factory.mktemp("all_fp8")
    path = write_fp8_checkpoint(tiny_checkpoints["2.0"], root / "all.safetensors", "comfyui", all_linears=True)

    def dequantise(tensors):
        for key in [k for k in tensors if k.endswith(".comfy_quant")]:
            stem = key[: -len(".comfy_quant")]
            tensors[stem + ".weight"] = dequantize(tensors[stem + ".weight"], tensors.pop(stem + ".weight_scale"),
                                                   torch.float32)
            del tensors[key]

    return path, _rewrite(path, root / "dequantised.safetensors", dequantise)


def test_a_file_with_every_dit_linear_in_fp8_loads_and_samples_as_the_dequantised_model(all_fp8):
    """ComfyUI's fp8_scaled files may quantise patchify_proj, the AdaLN and caption projection linears and proj_out
    too: the compute dtype comes from a parameter no file quantises, never from an fp8 weight."""
    path = all_fp8[0]
    model = load_transformer(path)
    fp8 = set(fp8_modules(model))
    assert {"patchify_proj", "proj_out", "adaln_single.linear", "caption_projection.linear_1"} <= fp8
    reference = load_transformer(path, fp8="dequantize", dtype=torch.float32)
    for got, want in zip(_outputs(model), _outputs(reference)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)  # the same products, one layer at a time
    text = TextEmbeddings(*(torch.randn(1, 7, model.config.caption_channels, generator=torch.Generator().manual_seed(i))
                            for i in range(2)))
    stage = Stage(ltx2_sigmas(2), video_guidance=GuidanceParams(cfg=2.0, stg=1.0, stg_blocks=(0,)))
    runs = [sample(m, text, text, empty_latent(64, 64, 9, 24.0), stage, torch.Generator().manual_seed(0))
            for m in (model, reference)]
    torch.testing.assert_close(runs[0].video, runs[1].video, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(runs[0].audio, runs[1].audio, atol=1e-4, rtol=1e-4)
    assert model.compute_dtype == torch.float32  # the file's unquantised dtype


def test_fp8_text_connectors_load_and_encode_as_their_dequantised_weights(all_fp8, gemma_files):
    path, dequantised = all_fp8
    encoder = load_prompt_encoder(gemma_files[0], path, max_length=32)
    assert len(fp8_modules(encoder.projection)) == 2 * 2 * 6  # two connectors of two blocks: q, k, v, out, FF
    got = encoder.encode("a red car in the rain")[0]
    want = load_prompt_encoder(gemma_files[0], dequantised, max_length=32).encode("a red car in the rain")[0]
    torch.testing.assert_close(got.video, want.video, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.audio, want.audio, atol=1e-5, rtol=1e-5)
