"""The memory plan counts each format's own bytes (GGUF from the file's tensor types, ComfyUI's int8 and MXFP8 with
their scales), through the path `ModelFiles.plan()` takes, and a streamed quantised model holds exactly the planned
bytes on its device: the streamer moves the quantised weights and their scale buffers, and its output is the
resident model's."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import ModelFiles, load_transformer
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.memory.plan import apply_memory_plan, plan_memory, transformer_weight_bytes
from ltx2_core.memory.weight_layout import GGUF_MIXES, GgufMix, file_layers, gguf_layers, policy_layers, tensor_bytes
from ltx2_core.quant.gguf import GGUFLinear
from ltx2_core.quant.int8 import INT8_CONVROT, INT8_ROWWISE, INT8_TENSORWISE, Int8Linear
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT
from support.configs import bf16_transformer, released_transformer_configs
from support.quant_models import wide_tiny, write_comfy_file, write_gguf

RELEASED = released_transformer_configs()
CONVROT256 = next(f for f in INT8_CONVROT if f.convrot == 256)


def _streamed_bytes_match(model, weights, config, resident: int) -> None:
    """`model` streamed with `resident` blocks holds the plan's device weights and runs as before."""
    inputs = demo_inputs(model, text_tokens=7)
    want = model(*inputs)
    plan = plan_memory(config, weights, 10**12, 9, 64, 96, 4, dtype=torch.float32)
    plan = plan._replace(resident_blocks=resident, streamed_blocks=config.num_layers - resident)
    streamer = apply_memory_plan(model, plan, "cpu")
    assert streamer.device_weight_bytes() == plan.device_weights
    slot = streamer.slots[0]
    assert sum(t.numel() * t.element_size() for t in slot) == weights.per_block
    for got, expected in zip(model(*inputs), want):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    return slot


@pytest.mark.parametrize("mix", [GgufMix("Q8_0"), GGUF_MIXES["Q4_K_M"], GgufMix("Q5_0")],
                         ids=["Q8_0", "Q4_K_M", "Q5_0"])
@pytest.mark.parametrize("resident", [0, 1])
def test_a_gguf_plans_its_file_types_and_streams_its_bytes(tmp_path, mix, resident):
    pytest.importorskip("gguf")
    config = wide_tiny("2.3")
    path = tmp_path / "tiny.gguf"
    types = write_gguf(path, demo_transformer(config), mix)
    assert {"F32", "BF16", mix.base} <= set(types.values())
    assert types["patchify_proj.weight"] == types["adaln_single.linear.weight"] == "BF16"  # kept as converted
    weights = transformer_weight_bytes(config, torch.float32, layers=file_layers(path))
    assert weights == transformer_weight_bytes(config, torch.float32, layers=gguf_layers(mix))  # the rule = the file
    model = load_transformer(path, dtype=torch.float32)
    assert weights.non_block + weights.per_block * config.num_layers == tensor_bytes(model)
    slot = _streamed_bytes_match(model, weights, config, resident)
    assert any(t.dtype == torch.uint8 for t in slot)  # the quantised bytes move, not a dequantised copy
    # bytes per weight of a block's linears: the type's (Q8_0 8.5 bits, Q5_0 5.5, Q4_K with Q6_K to_v / ff.net.2 ~5.1)
    linears = [m for m in model.transformer_blocks[0].modules() if isinstance(m, GGUFLinear)]
    bits = 8 * sum(m.weight.numel() for m in linears) / sum(m.in_features * m.out_features for m in linears)
    assert bits == pytest.approx({"Q8_0": 8.5, "Q4_K": 4.5, "Q5_0": 5.5}[mix.base], abs=0.7)


def test_a_q3_k_m_file_keeps_its_first_two_to_v_in_q5_k_and_is_planned_as_its_blocks_differ(tmp_path):
    """llama-quantize counts `to_v` tensors in the file's order: Q3_K_M's first two (block 0's attn1 and attn2) are
    Q5_K, the rest Q4_K; the plan takes block 0's kind for the resident blocks and gives each kind two slots, which
    the streamer holds exactly with every block streamed and bounds with one resident."""
    pytest.importorskip("gguf")
    config = wide_tiny("2.3")
    path = tmp_path / "tiny-Q3_K_M.gguf"
    types = write_gguf(path, demo_transformer(config), GGUF_MIXES["Q3_K_M"])
    to_v = {name: kind for name, kind in types.items() if name.endswith(".to_v.weight")}
    first = {"transformer_blocks.0.attn1.to_v.weight", "transformer_blocks.0.attn2.to_v.weight"}
    assert {n for n, k in to_v.items() if k == "Q5_K"} == first and set(to_v.values()) == {"Q5_K", "Q4_K"}
    weights = transformer_weight_bytes(config, torch.float32, layers=file_layers(path))
    assert weights == transformer_weight_bytes(config, torch.float32, layers=gguf_layers("Q3_K_M"))
    assert weights.slots > 2 * weights.per_block  # two kinds of block
    model = load_transformer(path, dtype=torch.float32)
    _streamed_bytes_match(model, weights, config, resident=0)
    plan = plan_memory(config, weights, 10**12, 9, 64, 96, 4, dtype=torch.float32)
    streamer = apply_memory_plan(load_transformer(path, dtype=torch.float32),
                                 plan._replace(resident_blocks=1, streamed_blocks=config.num_layers - 1), "cpu")
    assert streamer.device_weight_bytes() < plan._replace(resident_blocks=1, streamed_blocks=1).device_weights


@pytest.mark.parametrize("fmt, layer", [("int8_tensorwise", INT8_TENSORWISE), ("int8_rowwise", INT8_ROWWISE),
                                        ("int8_convrot", CONVROT256), ("mxfp8", MXFP8_FORMAT)])
def test_a_comfyui_int8_or_mxfp8_file_is_planned_by_model_files_and_streams_its_bytes(tmp_path, fmt, layer):
    pytest.importorskip("comfy_kitchen")
    config = wide_tiny("2.3")
    path = tmp_path / f"{fmt}.safetensors"
    write_comfy_file(path, demo_transformer(config), fmt)
    plan = ModelFiles(checkpoint=path).plan("cpu", frames=9, height=64, width=96, passes=4, budget=10**12,
                                           dtype=torch.float32)
    weights = plan.weights
    assert weights == transformer_weight_bytes(config, torch.float32, layers=policy_layers(layer))
    model = load_transformer(path, dtype=torch.float32)
    assert weights.non_block + weights.per_block * config.num_layers == tensor_bytes(model)
    slot = _streamed_bytes_match(model, weights, config, resident=1)
    assert {t.dtype for t in slot} >= ({torch.int8} if fmt.startswith("int8") else {torch.float8_e4m3fn})
    if fmt == "int8_rowwise":  # a 4-byte scale per row travels with the block (a buffer, not a parameter)
        scales = [m.weight_scale for m in model.transformer_blocks[1].modules() if isinstance(m, Int8Linear)]
        assert scales and all(s.shape[-1] == 1 and s.numel() > 1 for s in scales)


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_released_bytes_per_weight_of_each_format(version):
    """Header-free: the released configs on meta, each format's block bytes against bf16's (2 bytes a weight)."""
    config = RELEASED[version]
    bf16 = transformer_weight_bytes(config)
    ratios = {name: transformer_weight_bytes(config, layers=gguf_layers(name)).per_block / bf16.per_block
              for name in ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")}
    ratios |= {f.label: transformer_weight_bytes(config, layers=policy_layers(f)).per_block / bf16.per_block
               for f in (INT8_ROWWISE, MXFP8_FORMAT)}
    ratios["fp8"] = transformer_weight_bytes(config, fp8=True).per_block / bf16.per_block
    # a block is nearly all linear weights: bits a weight / 16, plus the bf16 vectors and tables; the _M mixes put
    # the to_v and the video feed-forward's down projection (29 % of a block's weights) in a higher type
    expected = {"Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K_M": 5.84, "Q4_K_M": 5.16, "Q3_K_M": 3.87, "Q2_K": 2.75,
                "int8 rowwise": 8, "MXFP8": 8.25, "fp8": 8}
    for name, bits in expected.items():
        assert ratios[name] == pytest.approx(bits / 16, abs=0.012), name
    assert ratios["Q8_0"] > ratios["fp8"] and ratios["Q4_K_M"] < 0.33


def _meta(config):
    with torch.device("meta"):
        return bf16_transformer(config)


# LTX-2.3's conversions under lcpp.patch's rules, GB: the file's tensors (issue 35's figures) and what loads
RELEASED_2_3_GGUF = {"Q8_0": (20.61, 20.59), "Q6_K": (16.12, 16.09), "Q5_K_M": (14.43, 14.41),
                     "Q4_K_M": (12.84, 12.82), "Q3_K_M": (9.65, 9.82), "Q2_K": (7.25, 7.23)}


@pytest.mark.parametrize("mix", RELEASED_2_3_GGUF)
def test_released_2_3_gguf_sizes_follow_lcpp_patch(mix):
    """The released 2.3 on meta, through the plan's path: the file's bytes and the bytes the plan counts; the
    non-block tensors stay BF16 / F32 (loaded: exactly bf16's 0.855 GB); Q3_K_M's plan counts every block as block 0
    (its two Q5_K to_v), an upper bound 0.17 GB over the file."""
    from ltx2_core.memory.weight_layout import gguf_file_bytes

    config = RELEASED["2.3"]
    file, loaded = RELEASED_2_3_GGUF[mix]
    weights = transformer_weight_bytes(config, layers=gguf_layers(mix))
    assert gguf_file_bytes(_meta(config), mix) / 1e9 == pytest.approx(file, abs=0.005)
    assert weights.total / 1e9 == pytest.approx(loaded, abs=0.005)
    assert weights.non_block == transformer_weight_bytes(config).non_block == 854_921_728


def test_lcpp_patch_types_by_name_on_the_released_2_3():
    """Which tensor takes which type (lcpp.patch's "ltxv" rules on 2.3's names)."""
    shapes = {n: tuple(t.shape) for n, t in _meta(RELEASED["2.3"]).state_dict().items()}
    q4, q3, q2 = (GGUF_MIXES[m].tensor_types(shapes) for m in ("Q4_K_M", "Q3_K_M", "Q2_K"))
    block = "transformer_blocks.{}.{}.weight".format
    for kept in ("adaln_single.linear", "audio_adaln_single.linear", "prompt_adaln_single.linear",
                 "av_ca_a2v_gate_adaln_single.linear", "patchify_proj", "audio_proj_out", "proj_out"):
        assert q4[f"{kept}.weight"].name == q2[f"{kept}.weight"].name == "BF16", kept
    assert q4["scale_shift_table"].name == q4[block(5, "prompt_scale_shift_table")[:-7]].name == "F32"
    assert q4[block(3, "attn1.to_q")[:-7] + ".bias"].name == "F32"
    assert [q4[block(7, n)].name for n in ("attn1.to_q", "attn2.to_v", "audio_attn1.to_v", "ff.net.2",
                                          "audio_ff.net.2", "ff.net.0.proj")] == \
        ["Q4_K", "Q6_K", "Q6_K", "Q6_K", "Q4_K", "Q4_K"]
    assert [q3[block(b, n)].name for b, n in ((0, "attn1.to_v"), (0, "attn2.to_v"), (0, "audio_attn1.to_v"),
                                             (1, "attn1.to_v"), (0, "ff.net.2"), (0, "audio_ff.net.2"))] == \
        ["Q5_K", "Q5_K", "Q4_K", "Q4_K", "Q4_K", "Q3_K"]
    assert [q2[block(9, n)].name for n in ("attn1.to_v", "ff.net.2", "attn1.to_gate_logits")] == \
        ["Q3_K", "Q2_K", "Q2_K"]


def test_the_small_cards_bench_reports_the_plan_modules_numbers():
    """bench/small_cards.py on one release, card and size: each cell is `plan_memory` of the format's bytes, with
    the decoders the command line counts (video, audio decoder and vocoder), and the chosen file follows the stated
    rule."""
    from bench.memory_plan import released_side
    from bench.small_cards import COPY_SHARE, PASSES, copy_seconds, readme_table, released_decoders, table
    from ltx2_core.memory.plan import TILE_BYTES_512

    files = ("fp8", "GGUF Q4_K_M", "GGUF Q2_K")
    (row,) = table(versions=("2.3",), cards=(12,), sizes=((768, 512, 121),), files=files)
    config = RELEASED["2.3"]
    decoders, side = released_decoders("2.3")
    # the audio decoder (31.9 M parameters) and 2.3's vocoder (128.5 M) in bf16 beside the video decoder
    assert decoders - released_side("2.3")[0] == pytest.approx(2 * (31.9e6 + 128.5e6), rel=0.01)
    for choice, weights in zip(row["choices"], (transformer_weight_bytes(config, fp8=True),
                                                transformer_weight_bytes(config, layers=gguf_layers("Q4_K_M")),
                                                transformer_weight_bytes(config, layers=gguf_layers("Q2_K")))):
        want = plan_memory(config, weights, 12 * 10**9, 121, 512, 768, PASSES, decoders=decoders,
                           tile_bytes_512=TILE_BYTES_512, side=side, ram=32 * 10**9, mappable=True)
        assert choice.plan == want
        assert want.peak <= 12e9
    residents = [c.plan.resident_blocks for c in row["choices"]]
    assert residents == sorted(residents) and residents[0] < residents[-1]  # fewer bytes, more blocks resident
    hidden = [c for c in row["choices"] if copy_seconds(c.plan) <= COPY_SHARE * row["compute"]]
    assert row["best"] is (hidden[0] if hidden else min(row["choices"], key=lambda c: copy_seconds(c.plan)))
    copies = [copy_seconds(c.plan) for c in row["choices"]]
    assert copies == sorted(copies, reverse=True)  # fewer bytes, less to copy
    assert f"| 12 GB | LTX-2.3 | {row['best'].file}" in readme_table([row])


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_no_file_fits_an_8_gb_card_while_the_text_side_shares_it(version):
    """At the released sizes, lcpp.patch's GGUF sizes and the decoders the command line counts, the smallest file
    (Q2_K, so every file) is refused on 8 GB: the prompt's encoding (5.2-5.5 GB) beside the non-block weights, two
    block slots and the decoders is more than the 7.36 GB usable. With the text side off the card bf16 fits too."""
    from bench.small_cards import table

    (on,) = table(versions=(version,), cards=(8,), sizes=((768, 512, 121),), files=("GGUF Q2_K",))
    assert on["best"].plan is None and "more memory" in on["best"].note
    files = ("bf16", "GGUF Q4_K_M", "GGUF Q2_K")
    (off,) = table(versions=(version,), cards=(8,), sizes=((768, 512, 121),), files=files, text="off")
    assert all(c.plan is not None and c.plan.peak <= 8e9 * 0.92 for c in off["choices"])
    assert off["best"].file == "GGUF Q4_K_M"


@pytest.mark.parametrize("kind", ["gguf", "int8_rowwise"])
def test_quantised_transformers_keep_the_sampler_free_of_host_syncs(tmp_path, kind):
    """Whole guided steps of a GGUF (Q8_0) and a ComfyUI int8 transformer: no host reads, no host-to-device copies
    (the dequantisation is device work)."""
    pytest.importorskip("gguf" if kind == "gguf" else "comfy_kitchen")
    from ltx2_core.geometry import audio_positions, video_positions
    from ltx2_core.sampling import GuidanceParams, denoise, guided_setup, ltx2_sigmas, noised_state
    from ltx2_core.types import TextEmbeddings
    from support.census import OpCensus

    source = demo_transformer(wide_tiny("2.3"), seed=4)
    path = tmp_path / ("q8.gguf" if kind == "gguf" else "int8.safetensors")
    if kind == "gguf":
        write_gguf(path, source, GgufMix("Q8_0"))
    else:
        write_comfy_file(path, source, kind)
    model = load_transformer(path, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    texts = [TextEmbeddings(torch.randn(1, 5, 256, generator=g), torch.randn(1, 5, 256, generator=g)) for _ in "pn"]
    guidance = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(1,), rescale=0.7, modality=3.0)
    plan = guided_setup(model, *texts, video_positions(2, 2, 3, 24.0), audio_positions(9), guidance, guidance)
    video = noised_state(torch.randn(1, 12, 128, generator=g), torch.randn(1, 12, 128, generator=g))
    audio = noised_state(torch.zeros(1, 9, 128), torch.randn(1, 9, 128, generator=g))
    with OpCensus() as census:
        out = denoise(plan, video, audio, ltx2_sigmas(3))
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    assert torch.isfinite(out[0].latent).all()


@pytest.mark.parametrize("layers", ["GGUF Q4_K_M", "int8 rowwise"])
def test_at_the_released_size_a_streamed_quantised_model_holds_the_planned_bytes(layers):
    """LTX-2.3 at its released widths as fake tensors (no memory), its linears in the format's layers, streamed
    to `meta` as a 12 GB plan says: the streamer's device bytes are the plan's."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ltx2_core.memory.weight_layout import install

    config = RELEASED["2.3"]
    rule = gguf_layers("Q4_K_M") if layers.startswith("GGUF") else policy_layers(INT8_ROWWISE)
    weights = transformer_weight_bytes(config, layers=rule)
    plan = plan_memory(config, weights, 12 * 10**9, 121, 512, 768, 4)
    assert 0 < plan.resident_blocks < 48
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = bf16_transformer(config)
        install(model, rule)  # the scales in fp32, as files store them and the loader keeps them
        streamer = apply_memory_plan(model, plan, "meta")
    assert streamer.device_weight_bytes() == plan.device_weights
    assert len(streamer.slots) == 2 and {t.dtype for t in streamer.slots[0]} >= {
        torch.uint8 if layers.startswith("GGUF") else torch.int8}
