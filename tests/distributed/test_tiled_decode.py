"""The tiled video decode spread over real ranks (gloo, CPU, one process per rank): the root's video equals the
one-device tiled decode (the same weighted tiles added in the same order), each rank decodes its round-robin share
of the tiles, and the bytes each rank sends are its tiles' (and the root's broadcast latent)."""

from __future__ import annotations

import pytest

from support.ranks import run_ranks


@pytest.mark.parametrize("case, world", [
    ("conv-6", 2), ("conv-6", 3),  # 6 tiles: an even share on 2 and on 3 ranks
    ("conv-5", 2), ("conv-5", 3),  # 5 tiles: uneven shares
    ("noise-6", 3),  # a timestep-conditioned decoder: the root's decode noise on every rank
    ("conv-1", 2),  # one tile: the root decodes alone
    ("diffusion-4", 2), ("diffusion-4", 3),  # LTX-2.5's diffusion decoder, 2 × 2 stage-4-5 tiles
])
def test_spread_decode_equals_one_device_and_counts_its_bytes(tmp_path, case, world):
    results = run_ranks("decode_rank.py", world, tmp_path, case)
    root = results[0]
    assert root["shape"] == root["want_shape"]
    assert root["diff"] <= 1e-5 * max(1.0, root["scale"]), root  # fp32; the same sums in the same order
    assert [r["is_none"] for r in results] == [False] + [True] * (world - 1)
    tiles = sorted(index for r in results for index in r["tiles"])
    if case == "conv-1":
        assert tiles == [] and all(r["own_tile_bytes"] == 0 for r in results)
    else:
        assert tiles == list(range(len(tiles))) and len(tiles) == int(case.rsplit("-", 1)[1])
        assert [r["tiles"] for r in results] == [tiles[rank::world] for rank in range(world)]  # round robin
    state = root["state_bytes"] if case.startswith("diffusion") else 0
    assert root["sent"] == (world - 1) * (root["latent_bytes"] + state)  # the broadcast, once per other rank
    for result in results[1:]:
        assert result["sent"] == result["own_tile_bytes"] > (0 if case != "conv-1" else -1), result
    assert root["received"] == sum(r["sent"] for r in results[1:])  # every tile sent reached the root
    assert {r["count"] for r in results} == {max(len(tiles), 1)}
