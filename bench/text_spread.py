"""The text encoder over ranks (issue 38, item 2), what one GPU can tell: Gemma 3 12B's forward (48 layers, bf16,
random weights made on the device: the values do not change the work) at 1,024 tokens for

* batch 2, the one-device encoding today (positive and negative in one pass);
* batch 1, what each rank runs when the prompts are encoded on different ranks;
* the first half of the layers at batch 2, what each rank of a two-rank pipeline runs (a pipeline's encoding is
  the sum of its stages: no faster than one device, it saves memory);

with the allocator's peak above the weights, each rank's weight bytes in a pipeline of 2, 4 and 8 ranks (the plan's
cuts), and the bytes exchanged per encoding (from the shapes, as the gloo tests count them). Times are medians
after a warm-up (CUDA events). The exchange itself (a 12.6 MB broadcast per prompt, 16 MB per pipeline cut) needs
two GPUs to time.

    python bench/text_spread.py            # on a GPU
    python bench/text_spread.py --quick    # CPU smoke run: 1/8 width, 4 layers, fp32
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from ltx2_core.memory.text_layout import GB, TextBytes, plan_text  # noqa: E402
from ltx2_core.model.text import gemma3  # noqa: E402
from suite_measure import median_ms, peak_extra_bytes  # noqa: E402

TOKENS, PROMPT_TOKENS = 1024, 120  # left padded to 1,024 as always; a prompt of about 120 tokens
CONTEXT_WIDTHS = 4096 + 2048  # LTX-2.3's video and audio contexts


def build(quick: bool, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    values = dict(gemma3.GEMMA3_12B_TEXT)
    if quick:
        values |= {"hidden_size": 480, "intermediate_size": 1920, "head_dim": 32, "query_pre_attn_scalar": 32,
                   "num_hidden_layers": 4, "vocab_size": 4096}
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in `dtype`: 24 GB of bf16, not 47 GB of fp32 first
    try:
        model = gemma3.build_on_meta(gemma3.text_config(values)).to_empty(device=device)
    finally:
        torch.set_default_dtype(default)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.02)
    gemma3.materialize_buffers(model, device)
    return model


def tokens(batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(3, 4000, (batch, TOKENS), device=device)
    mask = torch.zeros(batch, TOKENS, dtype=torch.int64, device=device)
    mask[:, -PROMPT_TOKENS:] = 1
    return ids, mask


def forward_ms(model: torch.nn.Module, batch: int, layers: int | None, device: torch.device, repeats: int):
    """(median ms, peak bytes above the weights) of the forward with `layers` layers (None: all)."""
    full = model.layers
    if layers is not None:
        model.layers = full[:layers]
        model.config.num_hidden_layers = layers
    ids, mask = tokens(batch, device)
    try:
        with torch.no_grad():
            run = lambda: gemma3.hidden_states(model, ids, mask)  # noqa: E731
            return median_ms(run, device, repeats), peak_extra_bytes(run, device)
    finally:
        model.layers = full
        model.config.num_hidden_layers = len(full)


def weight_bytes(model: torch.nn.Module) -> TextBytes:
    size = lambda m: sum(t.numel() * t.element_size() for t in m.parameters())  # noqa: E731
    state = TOKENS * model.config.hidden_size * next(model.parameters()).element_size()
    return TextBytes(tuple(size(layer) for layer in model.layers), size(model.embed_tokens), size(model.norm), state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device = torch.device("cpu" if args.quick or not torch.cuda.is_available() else "cuda")
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    model = build(args.quick, device, dtype)
    sizes = weight_bytes(model)
    half = len(model.layers) // 2
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "gemma_gb": sizes.whole / GB}
    for name, batch, layers in (("batch2", 2, None), ("batch1", 1, None), ("half_layers_batch2", 2, half)):
        ms, peak = forward_ms(model, batch, layers, device, args.repeats)
        result[name] = {"ms": round(ms, 2), "peak_extra_gb": round(peak / GB, 3)}
    result["split_over_batched"] = round(result["batch1"]["ms"] / result["batch2"]["ms"], 3)
    # each rank's bytes in a balanced pipeline (the projection not counted here)
    for ranks in (n for n in (2, 4, 8) if n <= len(model.layers)):
        layout = plan_text(sizes, [sizes.whole] * ranks, prompts=2)  # a replica and its states do not fit: cut
        result[f"pipeline{ranks}_rank_gb"] = [round(n / GB, 2) for n in layout.rank_bytes]
    state2 = 2 * sizes.state
    result["bytes"] = {"context_per_prompt_mb": TOKENS * CONTEXT_WIDTHS * 2 / 1e6,
                       "pipeline_handoff_per_cut_mb": state2 / 1e6,
                       "pipeline2_states_to_last_mb": (half + 1) * state2 / 1e6}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
