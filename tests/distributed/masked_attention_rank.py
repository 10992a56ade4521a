"""One rank of tests/distributed/test_masked_attention.py: the Ulysses attention functions with and without an
attention mask, and video self-attention with an attention bias (attention weights padded once per run, as
`LocalTokensRun` pads them), at a video token count that is not a multiple of sp, against SDPA on all tokens in this
process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ltx2_core.model.transformer.attention import attention_bias, sdpa  # noqa: E402
from ltx2_core.parallel.sequence_parallel import GatheredKeysAttention, UlyssesAttention, _Layout  # noqa: E402
from support.ranks import joined  # noqa: E402

VIDEO_TOKENS, AUDIO_TOKENS, HEADS, HEAD_DIM = 5, 3, 4, 8


def _mask(queries: int, keys: int, g: torch.Generator) -> torch.Tensor:
    mask = torch.rand(1, 1, queries, keys, generator=g) < 0.5
    mask[..., 0] = True  # every query attends to some key
    return mask


def main(rank: int, world: int, init_file: str, out: str) -> None:
    with joined(rank, world, init_file):
        g = torch.Generator().manual_seed(0)  # the same tensors on every rank
        q, k, v = (torch.randn(1, VIDEO_TOKENS, HEADS, HEAD_DIM, generator=g) for _ in range(3))
        audio_q = torch.randn(1, AUDIO_TOKENS, HEADS, HEAD_DIM, generator=g)
        video_mask, cross_mask = _mask(VIDEO_TOKENS, VIDEO_TOKENS, g), _mask(AUDIO_TOKENS, VIDEO_TOKENS, g)
        layout = _Layout(rank, world, dist.group.WORLD)
        layout.set_tokens(VIDEO_TOKENS, torch.device("cpu"))
        local_q, local_k, local_v = (layout.pad(x, 1)[:, layout.local] for x in (q, k, v))
        self_attention, cross_attention = UlyssesAttention(layout), GatheredKeysAttention(layout)
        diffs = {}
        weights = torch.rand(1, VIDEO_TOKENS, VIDEO_TOKENS, generator=g)
        weights[:, :, 1:2] = 0.0  # a key no query attends to
        bias, padded_bias = attention_bias(weights, torch.float32), attention_bias(layout.pad_weights(weights),
                                                                                   torch.float32)
        for name, mask, given in (("none", None, None), ("mask", video_mask, video_mask), ("bias", bias, padded_bias)):
            got = self_attention(local_q, local_k, local_v, given)
            want = layout.pad(sdpa(q, k, v, mask), 1)[:, layout.local]
            diffs[f"self {name}"] = (got - want)[:, : max(0, VIDEO_TOKENS - layout.local.start)].abs().max().item()
        for name, mask in (("none", None), ("mask", cross_mask)):
            got = cross_attention(audio_q, local_k, local_v, mask)
            diffs[f"cross {name}"] = (got - sdpa(audio_q, k, v, mask)).abs().max().item()
        Path(out).write_text(json.dumps({"padded": layout.padded, "diffs": diffs}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
