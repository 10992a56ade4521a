"""The text encoder spread over real torch.distributed ranks (gloo, CPU, one process per rank; issue 38, item 2):
the positive and negative prompts encoded on different ranks, and Gemma's layers as a pipeline chosen by the memory
plan, each equal to the one-device encoding, with the bytes each rank sends counted. Tiny Gemma 3 (2 layers, LTX-2.3
text path) and tiny Gemma 4 (7 layers, LTX-2.5's)."""

from __future__ import annotations

import pytest

from support.gemma import write_comfyui_file
from support.gemma4 import FILE_NAME, write_gemma4_file, write_transformer25_file
from support.ranks import run_ranks


@pytest.fixture(scope="module")
def families(tmp_path_factory, tiny_checkpoints):
    root = tmp_path_factory.mktemp("spread_text")
    return {"gemma3": (write_comfyui_file(root / "gemma_3_12B_it.safetensors"), tiny_checkpoints["2.3"]),
            "gemma4": (write_gemma4_file(root / FILE_NAME), write_transformer25_file(root / "transformer.safetensors"))}


@pytest.mark.parametrize("family, world", [("gemma3", 2), ("gemma4", 2), ("gemma4", 3)])
def test_spread_encodings_equal_the_one_device_encoding(tmp_path, families, family, world):
    text_encoder, checkpoint = families[family]
    results = run_ranks("text_rank.py", world, tmp_path, family, str(text_encoder), str(checkpoint))
    for rank, result in enumerate(results):
        split, piped = result["split"], result["pipeline"]
        # batch 1 vs the one-device batch of 2: the same padded tokens, only the GEMM's blocking differs
        assert split["vs_batched"] <= 1e-5 and piped["vs_batched"] <= 1e-5, result
        # the same computation as the one-device call of the same batch: exact
        assert split["vs_alone"] == 0.0 and split["one_prompt"] == 0.0 and piped["again_vs_alone"] == 0.0, result
        # prompts on ranks 0 and 1 (a third rank encodes nothing): each sends its prompt's contexts to the others
        context = split["context_bytes"]
        owned = 1 if rank < 2 else 0
        assert split["sent"] == (owned + (rank == 0)) * (world - 1) * context, (rank, split)
        assert split["received"] == (2 - owned + (rank != 0)) * context, (rank, split)
    _check_pipeline([r["pipeline"] for r in results], world)


def _check_pipeline(piped: list[dict], world: int) -> None:
    """The plan cut Gemma into `world` ranges that fit the budget; each rank holds less than the whole; the bytes
    are one hidden state (batch 2) per cut, each rank's states to the last rank, the contexts back."""
    bounds = piped[0]["bounds"]
    assert all(p["mode"] == "pipeline" and p["bounds"] == bounds for p in piped)
    assert bounds[0][0] == 0 and all(a < b for a, b in bounds)
    assert all(b == a for (_, b), (a, _) in zip(bounds, bounds[1:]))
    assert max(piped[0]["rank_bytes"]) <= piped[0]["budget"]
    for rank, p in enumerate(piped):
        assert p["resident"] < p["budget"], (rank, p)
        start, end = bounds[rank]
        states = (end - start + (rank == 0))  # the hidden states this rank computes (rank 0: also the embeddings)
        # two encodes: batch 2, then batch 1 (`again`)
        handoff = 3 * p["state_bytes"] * (rank < world - 1)  # its last layer's output to the next rank
        gathered = 3 * p["state_bytes"] * states * (rank < world - 1)
        contexts = 3 * p["context_bytes"] * (world - 1) if rank == world - 1 else 0
        assert p["sent"] == handoff + gathered + contexts, (rank, p)
