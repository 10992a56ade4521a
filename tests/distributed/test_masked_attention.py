"""The attention seam under Ulysses (2 gloo ranks, CPU): an attention mask over all tokens gives SDPA's result with
that mask, for video self-attention and the gathered video keys, also when the video tokens are padded; an additive
attention bias (a weighted IC-LoRA control's) over the padded tokens gives SDPA's result with the unpadded bias."""

from __future__ import annotations

from support.ranks import run_ranks


def test_ulysses_attention_takes_a_mask_over_all_tokens(tmp_path):
    results = run_ranks("masked_attention_rank.py", 2, tmp_path)
    for result in results:
        assert result["padded"] == 6  # 5 video tokens on 2 ranks: one padding token
        assert "self bias" in result["diffs"]
        for name, diff in result["diffs"].items():
            assert diff <= 1e-6, (name, diff)  # fp32, the same softmax over a different token order
