"""The plan counts the machine's RAM as well as the card: streamed blocks and Gemma's layers are pinned when they fit
beside the modules waiting for their visits, read from the memory-mapped files when they keep the files' dtype, and
refused otherwise with the change; the printed line shows both budgets; refusals state the budget, what was set
aside and what the run needs."""

from __future__ import annotations

import re

import pytest
import torch

from ltx2_core.memory.sizes import SideBytes, encode_activation_bytes, gemma_12b_bytes
from ltx2_core.memory.plan import (
    GB,
    HOST_HEADROOM,
    TILE_BYTES_512,
    MemoryPlanError,
    plan_memory,
    size,
    transformer_weight_bytes,
)
from ltx2_core.model.text.gemma3 import GEMMA3_12B_TEXT
from support.configs import released_transformer_configs

RELEASED = released_transformer_configs()
PROJECTION = {"2.0": int(2.9 * GB), "2.3": int(6.3 * GB)}  # the text projection and connectors, bf16 (issue 21)
DECODERS = int(1.2 * GB)


def released_side(version: str) -> SideBytes:
    rest, layer, layers = gemma_12b_bytes(torch.bfloat16)
    return SideBytes(rest, layer, layers, PROJECTION[version], encode_activations=encode_activation_bytes(
        GEMMA3_12B_TEXT["hidden_size"], GEMMA3_12B_TEXT["num_hidden_layers"], torch.bfloat16))


def plan(version="2.0", fp8=False, card=24, ram=64, mappable=False, **options):
    config = RELEASED[version]
    return plan_memory(config, transformer_weight_bytes(config, fp8=fp8), card * 10**9, 121, 512, 768, 4,
                       fp8_available=not fp8, decoders=DECODERS, tile_bytes_512=TILE_BYTES_512,
                       side=released_side(version), ram=ram * 10**9, mappable=mappable, **options)


def test_gemma_12b_bytes_are_the_released_sizes():
    rest, layer, layers = gemma_12b_bytes(torch.bfloat16)
    assert 2.0e9 < rest < 2.02e9  # the 262,208 x 3,840 embeddings (issue 21: 2.0 GB)
    assert layers == 48 * layer and 21e9 < layers < 22e9  # Gemma 3 12B: 24 GB with the embeddings


def test_ltx_2_0_bf16_streaming_is_pinned_when_the_ram_holds_it_and_mapped_or_refused_when_not():
    """LTX-2.0 bf16 on a 24 GB card streams 31 blocks (24 GB) beside Gemma's 21.5 GB of layers: 64 GB of RAM pins
    them; 32 GB cannot, so they are read from the memory-mapped files, or refused naming the change."""
    roomy = plan(ram=64)
    assert roomy.streamed_blocks == 31 and roomy.pin
    assert roomy.host_streamed + roomy.side.visitors <= HOST_HEADROOM * 64 * GB
    assert f"host: {size(roomy.host_streamed)} pinned + {size(roomy.side.visitors)} of 64.0 GB RAM" in \
        roomy.describe()
    mapped = plan(ram=32, mappable=True)
    assert not mapped.pin and "read from the memory-mapped files" in mapped.describe()
    with pytest.raises(MemoryPlanError, match=r"host memory: 32.0 GB of RAM available \(27.2 GB usable\); the run "
                       r"needs 45.5 GB for streaming \(31 streamed blocks 23.9 GB, Gemma's layers 21.5 GB\) .*; keep "
                       r"the files' dtypes \(.*\) so the streamed weights are read from the memory-mapped files$"):
        plan(ram=32, mappable=False)
    with pytest.raises(MemoryPlanError, match="keep the files' dtype"):
        plan(fp8=True, card=16, ram=16, mappable=False)


def test_a_ram_refusal_names_the_smallest_change_that_fits():
    """Keeping the files' dtype (read from the mapped files) before the fp8 checkpoint: on main the fp8 file was
    named first even where keeping the dtype alone would fit (§5 of issue 35); the fp8 file only where its halved
    blocks pinned would fit, and neither where the waiting modules alone overflow the RAM."""
    with pytest.raises(MemoryPlanError) as caught:
        plan(ram=48, mappable=False)  # pinned bf16 needs 45.5 + 4.9 GB of 40.8 usable; fp8's 33.5 + 4.9 fit
    assert str(caught.value).endswith("keep the files' dtypes (loader weight_dtype auto and fp8 auto; no --dtype and "
                                      "--fp8 auto) so the streamed weights are read from the memory-mapped files, or "
                                      "use the fp8 checkpoint (its streamed blocks are half the size)")
    with pytest.raises(MemoryPlanError, match=r"; close programs to free RAM, or use a card with more memory"):
        plan(ram=5, mappable=True)  # the waiting modules (4.9 GB) alone exceed 4.2 GB usable
    with pytest.raises(MemoryPlanError, match=r"; close programs to free RAM, or use a card with more memory"):
        plan(ram=5, mappable=False)


def test_the_printed_line_shows_the_device_and_the_host_budget():
    line = plan("2.3", fp8=True, card=24, ram=64).describe()
    assert re.search(r"; peak \d+\.\d GB of 24\.0 GB free; host: \d+\.\d GB pinned \+ \d+\.\d GB of 64\.0 GB RAM "
                     r"available$", line), line
    assert "visiting: encoding the prompt" in line and "+ decoders 1.2 GB" in line


def test_a_refusal_states_the_budget_what_was_set_aside_and_what_the_run_needs():
    """Never "does not fit 2.6 GB free … needs 2.6 GB": the usable part of the budget, the decoders and the text
    encoder set aside, what is left, and what the run needs."""
    with pytest.raises(MemoryPlanError) as caught:
        plan("2.3", card=12, source="budget")
    message = str(caught.value)
    assert message.startswith("768x512x121 on 12.0 GB budget (11.0 GB usable), set aside: decoders 1.2 GB, text "
                              "encoder while encoding 8.6 GB; 9.8 GB is left, with every block streamed and one "
                              "pass per forward the run needs 11.0 GB: non-block weights 854.9 MB + 2 block slots "
                              "1.5 GB + the largest visiting stage 8.6 GB"), message
    assert message.endswith("use a GPU with more memory, or spread the model over several with tensor parallelism")
    with pytest.raises(MemoryPlanError, match=r"on 13.0 GB free \(12.0 GB usable\), .*; quantise the weights to fp8"):
        plan("2.3", card=13)


def test_the_printed_line_names_every_figure_of_the_peak_also_when_decoding_sets_it():
    """The weights, the decoders and the largest stage add up to the peak; on main the decode tile's bytes were left
    out, so where decoding sets the peak the parts summed to less (175 MB against "peak 378.9 MB")."""
    small = plan("2.3", fp8=True, card=32, ram=64)._replace(activations=10**6, text_kv=0, side=SideBytes())
    stages = small.stages()
    assert max(stages, key=stages.get) == "decoding"
    line = small.describe()
    assert f"decoding in 512 px tiles ({size(stages['decoding'])})" in line, line
    assert small.peak == small.device_weights + small.decoders + stages["decoding"]


def test_stream_all_streams_every_block_and_says_so():
    streamed = plan("2.3", fp8=True, card=32, stream_all=True)
    assert streamed.resident_blocks == 0 and streamed.streamed_blocks == 48 and not streamed.cache_text_kv
    assert streamed.describe().startswith("memory plan: 0/48 blocks resident")
    assert plan("2.3", fp8=True, card=32).resident_blocks == 48  # auto: as many as fit
