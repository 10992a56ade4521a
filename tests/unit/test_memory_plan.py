"""The memory plan: made from the config and the free memory before any weight moves; for the released models at
768×512×121 with four passes on 24 and 32 GB cards it keeps the peak inside the budget, prefers resident blocks,
then dropping the text K/V cache, then streaming; its weight bytes equal what a streamed model really holds on the
device; an impossible request is refused with the smallest change."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.memory.plan import (
    GB,
    HEADROOM,
    MemoryPlanError,
    apply_memory_plan,
    plan_memory,
    text_kv_bytes,
    transformer_weight_bytes,
)
from support.configs import bf16_transformer, released_transformer_configs

RELEASED = released_transformer_configs()


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_weight_bytes_of_the_releases(version):
    bf16, fp8 = (transformer_weight_bytes(RELEASED[version], fp8=f) for f in (False, True))
    assert 36e9 < bf16.total < 40e9 and bf16.blocks == 48  # the 19B / 22B transformers in bf16
    assert 0.49 < fp8.total / bf16.total < 0.53  # the block linears are nearly all of it
    tp2 = transformer_weight_bytes(RELEASED[version], tp=2)
    assert 0.49 < tp2.per_block / bf16.per_block < 0.52


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("gb", [24, 32])
def test_plans_for_24_and_32_gb_cards_fit_and_say_so(version, fp8, gb):
    config = RELEASED[version]
    plan = plan_memory(config, transformer_weight_bytes(config, fp8=fp8), gb * 10**9, 121, 512, 768, 4,
                       fp8_available=not fp8)
    assert plan.peak <= HEADROOM * gb * GB
    assert plan.passes_per_forward == 4  # streaming before splitting the passes: one copy serves all four
    assert (plan.streamed_blocks > 0) == (not fp8 or gb == 24)
    if plan.streamed_blocks:
        assert not plan.cache_text_kv  # the cache goes before any block streams
        assert plan.peak + plan.weights.per_block > HEADROOM * gb * GB  # not one more block would fit
    line = plan.describe()
    assert f"{plan.resident_blocks}/48 blocks resident" in line and f"of {gb}.0 GB free" in line
    print(line)


def test_the_text_kv_cache_is_dropped_before_any_block_streams():
    config = RELEASED["2.0"]
    weights = transformer_weight_bytes(config, fp8=True)
    kv = text_kv_bytes(config, 4)
    assert kv > 4 * GB
    just_without_cache = plan_memory(config, weights, int(27 * GB / HEADROOM), 121, 512, 768, 4)
    assert just_without_cache.streamed_blocks == 0 and not just_without_cache.cache_text_kv
    with_cache = plan_memory(config, weights, int(32 * GB / HEADROOM), 121, 512, 768, 4)
    assert with_cache.cache_text_kv and with_cache.streamed_blocks == 0


@pytest.mark.parametrize("resident", [0, 1, 3])
def test_the_planned_device_weights_are_what_a_streamed_model_holds(resident):
    config = TransformerConfig.tiny("2.3")
    model = copy.deepcopy(demo_transformer(config))
    plan = plan_memory(config, transformer_weight_bytes(config, torch.float32), 10**12, 9, 64, 96, 4,
                       dtype=torch.float32)._replace(resident_blocks=resident, streamed_blocks=3 - resident)
    streamer = apply_memory_plan(model, plan, "cpu")
    if resident == 3:
        assert streamer is None
        assert plan.device_weights == sum(t.numel() * t.element_size() for t in model.parameters())
    else:
        assert streamer.device_weight_bytes() == plan.device_weights


def test_an_impossible_request_names_the_smallest_change():
    config = RELEASED["2.3"]
    with pytest.raises(MemoryPlanError, match=r"768x512x121 on 3.0 GB free \(2.8 GB usable\); .* needs 3.5 GB: .* "
                       "quantise the weights to fp8"):
        plan_memory(config, transformer_weight_bytes(config), 3 * 10**9, 121, 512, 768, 4, fp8_available=True)
    with pytest.raises(MemoryPlanError, match="1536x1024x121 on 3.0 GB free .*; 768x512 fits"):
        plan_memory(config, transformer_weight_bytes(config, fp8=True), 3 * 10**9, 121, 1024, 1536, 4)
    assert plan_memory(config, transformer_weight_bytes(config, fp8=True), 3 * 10**9, 121, 512, 768, 4).peak < 3e9


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_the_activation_estimate_covers_what_a_full_width_forward_holds(version):
    """Fake tensors (no memory, no kernels): two released-width blocks at 256x256x17 with four passes; the estimate
    is above the measured peak of live tensors and not far above it."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from bench.memory import LiveTensorMemory
    from ltx2_core.demo import demo_inputs
    from ltx2_core.geometry import audio_latent_length, audio_positions, video_positions
    from ltx2_core.memory.plan import activation_bytes

    config = dataclasses.replace(RELEASED[version], num_layers=2)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = bf16_transformer(config)
        with torch.no_grad():
            video, audio, _ = demo_inputs(model, pixel_frames=17, height=256, width=256, text_tokens=8)
            video, audio = (type(s)(*(t.expand(4, *t.shape[1:]) for t in s)) for s in (video, audio))
            contexts = [torch.randn(4, 1024, config.caption_channels or s.context_dim, dtype=torch.bfloat16)
                        for s in (config.video, config.audio)]
            memory = LiveTensorMemory()
            memory.ignore([*model.parameters(), *model.buffers()])
            with memory:
                run = model.prepare_run(video_positions(3, 8, 8, 24.0), audio_positions(audio_latent_length(17, 24.0)),
                                        *contexts, cache_text_kv=False)
                model(video, audio, run)
    estimate = activation_bytes(config, 17, 256, 256, 4)
    assert memory.peak <= estimate <= 2 * memory.peak, (memory.peak, estimate)


def test_decode_tiles_shrink_to_fit_next_to_the_weights():
    """Decoding follows sampling on the same device: the largest tile that fits beside the planned weights (a small
    request, whose sampling leaves little room after streaming, gets smaller tiles)."""
    from ltx2_core.memory.plan import TILE_BYTES_512, decode_tile_bytes

    config, free = RELEASED["2.3"], 24 * 10**9
    weights = transformer_weight_bytes(config, fp8=True)
    tiles = {}
    for request in ((121, 512, 768, 4), (9, 256, 256, 1)):
        plan = plan_memory(config, weights, free, *request, decoders=3 * 10**9, tile_bytes_512=TILE_BYTES_512)
        room = HEADROOM * free - plan.device_weights - plan.decoders
        assert decode_tile_bytes(plan.decode_tile) <= room and plan.peak <= HEADROOM * free
        assert plan.tiling().spatial_tile == plan.decode_tile and f"{plan.decode_tile} px tiles" in plan.describe()
        tiles[request] = plan.decode_tile
    assert tiles[(121, 512, 768, 4)] == 512 and tiles[(9, 256, 256, 1)] < 512
    assert plan_memory(config, weights, free, 9, 256, 256, 1).decode_tile == 512  # decoding left out


def test_ltx25_s_diffusion_decoder_decodes_in_smaller_tiles_beside_the_same_blocks():
    """LTX-2.5 at 768x512x121 with four passes on 24 GB: with the diffusion decoder (every frame of a tile at once,
    beside its video-sized tensors) decoding takes 256 px tiles where the conv decoder's take 512; the resident
    blocks stay those of the conv decoder (the smallest decode, 3.2 GB, fits in what sampling's activations leave)
    and every tile size gives a valid tiling."""
    from ltx2_core.memory.plan import TILE_BYTES_512, TILE_SIZES, decode_tile_bytes
    from ltx2_core.memory.sizes import diffusion_decode_bytes

    config, free = RELEASED["2.5"], 24 * 10**9
    base, at_512 = diffusion_decode_bytes(121, 512, 768)
    for fp8, resident in ((False, 21), (True, 44)):
        weights = transformer_weight_bytes(config, fp8=fp8)
        conv = plan_memory(config, weights, free, 121, 512, 768, 4, tile_bytes_512=TILE_BYTES_512)
        diffusion = plan_memory(config, weights, free, 121, 512, 768, 4, tile_bytes_512=at_512, decode_base=base)
        assert (conv.resident_blocks, conv.decode_tile) == (resident, 512)
        assert (diffusion.resident_blocks, diffusion.decode_tile) == (resident, 256)
        assert diffusion.stages()["decoding"] == base + decode_tile_bytes(256, at_512) < 3.2 * GB
        assert diffusion.peak <= HEADROOM * free
    for tile in TILE_SIZES:
        assert diffusion._replace(decode_tile=tile).tiling().spatial_overlap in (32, 64)  # multiples of 32 px


def test_ltx25_s_whole_run_at_24_gb_keeps_what_the_table_says():
    """The plan the command line makes for LTX-2.5's files (every module at the released sizes, 64 GB of RAM), the
    rows of docs/performance.md: resident blocks and decode tiles per video decoder and weight mode."""
    from bench.memory_plan import released_plan

    rows = {(decoder, fp8): released_plan("2.5", fp8, 24, 64, decoder=decoder)
            for decoder in ("conv", "diffusion") for fp8 in (False, True)}
    assert {key: (plan.resident_blocks, plan.decode_tile) for key, plan in rows.items()} == {
        ("conv", False): (17, 512), ("conv", True): (36, 512),
        ("diffusion", False): (18, 256), ("diffusion", True): (38, 256)}
    assert all(plan.peak <= HEADROOM * 24 * GB and plan.pin for plan in rows.values())


def test_an_impossible_ltx25_request_names_the_smallest_change():
    """The diffusion decoder's smallest decode counts like a visiting stage: it is in the budget line, and a smaller
    size is proposed with its decode scaled down."""
    from ltx2_core.memory.sizes import diffusion_decode_bytes

    config = RELEASED["2.5"]
    decode = dict(zip(("decode_base", "tile_bytes_512"), diffusion_decode_bytes(121, 512, 768)))
    with pytest.raises(MemoryPlanError, match=r"768x512x121 on 5.5 GB free .*set aside: the diffusion decoder's "
                       r"smallest tiles 3.2 GB; .* quantise the weights to fp8"):
        plan_memory(config, transformer_weight_bytes(config), int(5.5e9), 121, 512, 768, 4, fp8_available=True,
                    **decode)
    with pytest.raises(MemoryPlanError, match="; 384x256 fits"):
        plan_memory(config, transformer_weight_bytes(config, fp8=True), int(4.5e9), 121, 512, 768, 4, **decode)


def test_a_sequence_parallel_rank_holds_its_share_of_the_video_activations():
    """sp divides the video tokens' activations; the audio, the text and the gathered video keys and values of the
    video->audio attention are not divided, so each doubling buys less than twice the window."""
    from ltx2_core.memory.plan import activation_bytes

    config = RELEASED["2.3"]
    one, two, eight = (activation_bytes(config, 721, 512, 768, 1, sp=sp) for sp in (1, 2, 8))
    assert activation_bytes(config, 721, 512, 768, 1) == one  # the default is one device
    assert one / 2 < two < one and two / 4 < eight < two / 2
    weights = transformer_weight_bytes(config, fp8=True)
    plans = [plan_memory(config, weights, 80 * 10**9, 2401, 512, 768, 1, sp=sp) for sp in (1, 4)]
    assert plans[1].activations < plans[0].activations / 2


def test_the_weight_bytes_are_counted_alike_inside_a_callers_fake_tensor_mode():
    """In a fresh process (the failure hid behind an earlier count): the plan's meta model was converted inside the
    caller's FakeTensorMode, and fp8's layout failed with "Couldn't swap Linear.weight" (test_memory_stages's fp8
    cases alone)."""
    import subprocess
    import sys

    script = ("import torch\nfrom torch._subclasses.fake_tensor import FakeTensorMode\n"
              "from ltx2_core import TransformerConfig\nfrom ltx2_core.memory.plan import transformer_weight_bytes\n"
              "config = TransformerConfig.tiny('2.0')\nwith FakeTensorMode(allow_non_fake_inputs=True):\n"
              "    inside = transformer_weight_bytes(config, fp8=True)\n"
              "assert inside == transformer_weight_bytes(config, fp8=True), inside\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-2000:]
