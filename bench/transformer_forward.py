"""Our transformer forward vs the reference ltx_core LTXModel, same config and weights, same process.

Measures (median of repeated runs) one guidance step of the LTX-2 dev guider = 4 passes (cond, uncond, STG,
modality-isolated): ours as ONE batched forward with RoPE prepared once per run, the reference as four B=1 forwards
(what ltx_pipelines and ComfyUI-LTXVideo do). Also counts host syncs and host->device copies per step on CPU.

    python bench/transformer_forward.py [--layers 4] [--frames 5] [--height 256] [--width 384] [--repeats 5]

Needs the reference: pip install --no-deps ltx-core==1.0.0 (plus einops scipy transformers).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ltx2_core.model.transformer.config import StreamConfig, TransformerConfig  # noqa: E402
from ltx2_core.types import PassPerturbation, StreamInput  # noqa: E402
from ltx2_core.demo import random_weights_  # noqa: E402
from ltx2_core.geometry import audio_latent_length, audio_positions, video_positions  # noqa: E402
from ltx2_core.model.transformer import BatchPerturbations, LTX2Transformer  # noqa: E402
from support.reference import import_ltx_core, reference_transformer  # noqa: E402

SYNC_OPS = {"aten._local_scalar_dense", "aten.nonzero", "aten.is_nonzero", "aten.item"}


class Census(TorchDispatchMode):
    """Counts device->host reads and all dispatched ATen ops (a proxy for kernel launches on a GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.syncs += str(func.overloadpacket) in SYNC_OPS
        self.ops += 1
        return func(*args, **(kwargs or {}))


def bench_config(layers: int, version: str) -> TransformerConfig:
    """Real structure at 1/8 width (video 4 heads x 128 = 512, audio 4 x 64 = 256): the per-block op mix of the
    released model at a size a 2-core CPU runs in seconds."""
    is_23 = version == "2.3"
    return TransformerConfig(
        version=TransformerConfig.tiny(version).version,
        video=StreamConfig(heads=4, head_dim=128, context_dim=512, in_channels=128, out_channels=128,
                           max_pos=(20, 2048, 2048)),
        audio=StreamConfig(heads=4, head_dim=64, context_dim=256, in_channels=128, out_channels=128, max_pos=(20,)),
        num_layers=layers, caption_channels=None if is_23 else 480, gated_attention=is_23,
        cross_attention_adaln=is_23, rope_type="split", rope_float64=True,
    )


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bench_arguments(doc: str) -> argparse.ArgumentParser:
    """The options every transformer-sized bench shares: structure, depth, clip size, text length, repeats."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", default="2.0", choices=["2.0", "2.3"])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--frames", type=int, default=9, help="pixel frames (8k+1)")
    p.add_argument("--height", type=int, default=256)
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--text-tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    return p


def bench_models(args: argparse.Namespace) -> tuple[TransformerConfig, LTX2Transformer, torch.nn.Module]:
    """Our transformer with random weights and the reference LTXModel holding the same weights."""
    config = bench_config(args.layers, args.version)
    with torch.device("meta"):
        ours = LTX2Transformer(config)
    random_weights_(ours, seed=0, std=0.02).eval()
    ref = reference_transformer({k: v.clone() for k, v in ours.state_dict().items()}, config.to_metadata())
    return config, ours, ref


def main() -> None:
    args = bench_arguments(__doc__).parse_args()
    torch.set_grad_enabled(False)
    config, ours, ref = bench_models(args)
    import_ltx_core()
    from ltx_core.guidance.perturbations import (
        BatchedPerturbationConfig, Perturbation, PerturbationConfig, PerturbationType as T,
    )
    from ltx_core.model.transformer import Modality

    frames, rows, cols = (args.frames - 1) // 8 + 1, args.height // 32, args.width // 32
    tv, ta = frames * rows * cols, audio_latent_length(args.frames, 24.0)
    vpos, apos = video_positions(frames, rows, cols, 24.0), audio_positions(ta)
    caption_v = config.caption_channels or config.video.context_dim
    caption_a = config.caption_channels or config.audio.context_dim
    vlat, alat = torch.randn(1, tv, 128), torch.randn(1, ta, 128)
    ctx = [(torch.randn(1, args.text_tokens, caption_v), torch.randn(1, args.text_tokens, caption_a)) for _ in range(2)]
    sigma = torch.tensor([0.7])
    stg_block = args.layers // 2

    passes = [PassPerturbation(), PassPerturbation(), PassPerturbation.stg([stg_block], [stg_block]),
              PassPerturbation.isolated()]
    pert = BatchPerturbations(passes, args.layers, "cpu", torch.float32)
    contexts = [ctx[0], ctx[1], ctx[0], ctx[0]]
    run = ours.prepare_run(vpos, apos, torch.cat([c[0] for c in contexts]), torch.cat([c[1] for c in contexts]))
    s4 = sigma.expand(4)

    def ours_step():
        return ours(StreamInput(vlat.expand(4, -1, -1), s4, s4[:, None]),
                    StreamInput(alat.expand(4, -1, -1), s4, s4[:, None]), run, pert)

    ref_perts = [
        BatchedPerturbationConfig.empty(1), BatchedPerturbationConfig.empty(1),
        BatchedPerturbationConfig([PerturbationConfig([Perturbation(T.SKIP_VIDEO_SELF_ATTN, [stg_block]),
                                                       Perturbation(T.SKIP_AUDIO_SELF_ATTN, [stg_block])])]),
        BatchedPerturbationConfig([PerturbationConfig([Perturbation(T.SKIP_A2V_CROSS_ATTN, None),
                                                       Perturbation(T.SKIP_V2A_CROSS_ATTN, None)])]),
    ]

    def ref_step():
        outs = []
        for (vc, ac), rp in zip(contexts, ref_perts):
            video = Modality(vlat, sigma, torch.full((1, tv, 1), 0.7), vpos, vc)
            audio = Modality(alat, sigma, torch.full((1, ta, 1), 0.7), apos, ac)
            outs.append(ref(video, audio, rp))
        return outs

    got, want = ours_step(), ref_step()
    max_diff = max((got[0][i] - w[0][0]).abs().max().item() for i, w in enumerate(want))
    ours_ms, ref_ms = median_ms(ours_step, args.repeats), median_ms(ref_step, args.repeats)
    census_ours, census_ref = Census(), Census()
    with census_ours:
        ours_step()
    with census_ref:
        ref_step()
    print(f"config: LTX-{args.version} structure, {args.layers} blocks, video 4x128, audio 4x64; "
          f"{tv} video + {ta} audio tokens, {args.text_tokens} text tokens; threads {torch.get_num_threads()}")
    print(f"guidance step (4 passes): ours batched {ours_ms:.1f} ms | reference 4 x B=1 {ref_ms:.1f} ms | "
          f"ratio {ref_ms / ours_ms:.2f}x | max |diff| {max_diff:.1e}")
    print(f"host syncs per step: ours {census_ours.syncs} | reference {census_ref.syncs}; "
          f"ATen ops per step: ours {census_ours.ops} | reference {census_ref.ops} "
          f"({census_ref.ops / census_ours.ops:.2f}x)")


if __name__ == "__main__":
    main()
