"""The cost model's collective bytes (ltx2_core/parallel/traffic.py) against what real gloo ranks send: a tiny
transformer's forward under sp 2 and tp 2, every collective's input recorded (tests/distributed/traffic_rank.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.parallel import ParallelConfig
from ltx2_core.parallel.traffic import FP32, Tokens, forward_traffic
from support.ranks import run_ranks


@pytest.mark.parametrize("shape, version", [("1x2x1", "2.3"), ("1x1x2", "2.3"), ("1x1x2", "2.5")],
                         ids=["SP2", "TP2", "TP2-2.5"])
def test_model_bytes_equal_what_ranks_send(tmp_path, shape, version):
    layout = ParallelConfig(*(int(n) for n in shape.split("x")))
    results = run_ranks("traffic_rank.py", layout.world_size, tmp_path, shape, version)
    for result in results:
        config = ran(result["config"])
        assert result["element_size"] == FP32  # the tiny model runs in fp32: the model is asked for 4-byte values
        tokens = Tokens(result["video_tokens"], result["audio_tokens"], result["text_tokens"])
        assert tokens.video != tokens.audio  # the video and audio terms are told apart
        predicted = forward_traffic(config, tokens, layout, element=FP32)
        # the same sums of whole byte counts, in another order: equal up to float rounding
        assert predicted.sp_bytes == pytest.approx(result["sent"]["sp_bytes"], rel=1e-12), result["calls"]
        assert predicted.tp_bytes == pytest.approx(result["sent"]["tp_bytes"], rel=1e-12), result["calls"]
        assert (predicted.sp_bytes > 0) == (layout.sp > 1) and (predicted.tp_bytes > 0) == (layout.tp > 1)
        calls = len(result["calls"])
        assert calls == predicted.sp_steps + predicted.tp_steps // 2  # one step per all-to-all / all-gather, two
        # per all-reduce (its reduce-scatter and all-gather halves)


def ran(sizes: dict) -> TransformerConfig:
    """The tiny config a rank ran (layout_rank.four_heads: the release's tiny structure with 4 heads per stream)."""
    tiny = TransformerConfig.tiny(sizes["version"], num_layers=sizes["layers"])
    video = replace(tiny.video, heads=sizes["video_heads"], head_dim=sizes["video_head_dim"])
    audio = replace(tiny.audio, heads=sizes["audio_heads"], head_dim=sizes["audio_head_dim"])
    return replace(tiny, video=replace(video, context_dim=video.width), audio=replace(audio, context_dim=audio.width))
