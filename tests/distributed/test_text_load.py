"""The prompt encoder loaded by its text layout (issue 38, item 2) on real torch.distributed ranks (gloo, CPU): the
layout planned from the files' headers (equal to the loaded encoder's bytes) and each rank's room before Gemma
loads, each pipeline rank reading only its layers (and rank 0 the embeddings, the last rank the head), exactly its
planned bytes and less than the whole; the spread encoding equals the one-device encoding."""

from __future__ import annotations

import pytest

from support.gemma import write_comfyui_file
from support.gemma4 import FILE_NAME, write_gemma4_file, write_transformer25_file
from support.ranks import run_ranks


@pytest.fixture(scope="module")
def families(tmp_path_factory, tiny_checkpoints):
    """family -> (text encoder file, checkpoint or transformer file): tiny Gemma 3 (2 layers), tiny Gemma 4 (7)."""
    root = tmp_path_factory.mktemp("text_load")
    return {"gemma3": (write_comfyui_file(root / "gemma_3_12B_it.safetensors"), tiny_checkpoints["2.3"]),
            "gemma4": (write_gemma4_file(root / FILE_NAME), write_transformer25_file(root / "transformer.safetensors"))}


@pytest.mark.parametrize("family, world", [("gemma3", 2), ("gemma4", 3)])
def test_each_pipeline_rank_reads_only_its_part(tmp_path, families, family, world):
    text_encoder, checkpoint = families[family]
    results = run_ranks("text_load_rank.py", world, tmp_path, family, str(text_encoder), str(checkpoint))
    bounds = results[0]["bounds"]
    assert all(r["mode"] == "pipeline" and r["bounds"] == bounds for r in results)
    assert sum(r["read"] for r in results) == results[0]["whole"]  # every weight read once, by one rank
    for rank, result in enumerate(results):
        assert result["header_equals_loaded"], result
        assert result["read"] == result["planned"] < result["whole"], (rank, result)
        start, end = bounds[rank]
        assert result["read_layers"] == [start <= i < end for i in range(len(result["read_layers"]))], (rank, result)
        assert result["vs_batched"] <= 1e-5, (rank, result)  # batch 1 vs 2: the GEMMs' blocking only
