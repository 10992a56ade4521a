"""One rank of the layout tests (tests/distributed/test_layouts.py, real gloo groups on a named device mesh): a tiny
transformer (of a release's structure) with 4 heads per stream under `cfg × sp × tp`, against the whole model in this
process."""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
from torch.distributed.tensor.debug import CommDebugMode  # noqa: E402

from ltx2_core.model.transformer.config import TransformerConfig  # noqa: E402
from ltx2_core.demo import demo_inputs, demo_transformer  # noqa: E402
from ltx2_core.parallel import ParallelConfig  # noqa: E402
from ltx2_core.parallel.cfg_parallel import CfgParallel  # noqa: E402
from ltx2_core.parallel.mesh import device_mesh  # noqa: E402
from ltx2_core.parallel.sequence_parallel import sequence_parallel  # noqa: E402
from ltx2_core.parallel.tensor_parallel import tensor_parallel  # noqa: E402
from support import cfg_case  # noqa: E402
from support.ranks import joined  # noqa: E402


def four_heads(version: str = "2.3") -> torch.nn.Module:
    tiny = TransformerConfig.tiny(version)
    video, audio = tiny.video, tiny.audio  # 2.3 and 2.5 have no caption projection: contexts as wide as the streams
    config = replace(tiny, video=replace(video, heads=4, context_dim=4 * video.head_dim),
                     audio=replace(audio, heads=4, context_dim=4 * audio.head_dim))
    return demo_transformer(config, seed=4)


def parallelize(model: torch.nn.Module, layout: ParallelConfig):
    """TP, then SP (the fixed order); the CFG runner for the plan (None without cfg)."""
    mesh = device_mesh(layout, "cpu")
    if layout.tp > 1:
        tensor_parallel(model, mesh["tp"].get_group())
    if layout.sp > 1:
        sequence_parallel(model, mesh["sp"].get_group())
    return CfgParallel(mesh["cfg"].get_group()) if layout.cfg > 1 else None


def main(rank: int, world: int, init_file: str, shape: str, version: str, out: str) -> None:
    with joined(rank, world, init_file):
        layout = ParallelConfig(*(int(n) for n in shape.split("x")))
        full = four_heads(version)
        model = copy.deepcopy(full)
        runner = parallelize(model, layout)
        result = {"forward": {}}
        odd_weights = cfg_case.weights(9, 3)  # 3 latent frames of 1 × 3 tokens: 9, padded to a multiple of sp
        for name, size in (("even", dict(height=64, width=96)), ("odd", dict(height=32, width=96)),
                           ("odd-weighted", dict(height=32, width=96, video_attention=odd_weights))):
            want = full(*demo_inputs(full, text_tokens=7, **size))
            inputs = demo_inputs(model, text_tokens=7, **size)  # the run's constants: made once, before the forward
            with CommDebugMode() as comm:
                got = model(*inputs)
            result["forward"][name] = {
                "tokens": want[0].shape[1], "diff": max((g - w).abs().max().item() for g, w in zip(got, want)),
                "collectives": {str(op): count for op, count in comm.get_comm_counts().items()}}
        want = cfg_case.run(cfg_case.plan(full))
        got = cfg_case.run(cfg_case.plan(model, runner=runner))
        result["sampling_diff"] = max((g - w).abs().max().item() for g, w in zip(got, want))
        want = cfg_case.run(cfg_case.plan(full, video_attention=cfg_case.weights()))
        got = cfg_case.run(cfg_case.plan(model, runner=runner, video_attention=cfg_case.weights()))
        result["weighted_sampling_diff"] = max((g - w).abs().max().item() for g, w in zip(got, want))
        result["blocks"], result["cached_text_kv"] = full.config.num_layers, full.config.static_text_kv
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
