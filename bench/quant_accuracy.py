"""Each weight format's output error against the unquantised model, and its bytes per weight: a tiny random-weight
transformer with 256-wide streams (`tests/support/quant_models.py` `wide_tiny`: the released block structure, every
format's block sizes divide its rows), written as each format's files are written (GGUF by the `gguf` package's
quantiser with the public conversions' type rule; ComfyUI's int8 / MXFP8 / fp8 by comfy-kitchen's quantisers),
loaded through `load_transformer` and run in fp32 (so the error is the weights' alone); the reference is the same
model unquantised (fp32), and bf16 weights are a row of their own. Each linear's random weights are scaled to a
standard deviation of 1/√(inputs), the scale of trained networks: at the demo's 0.2 the 256-wide blocks amplify any
perturbation chaotically (2 % of noise on the weights gave 13 % or 20 % on the output, by chance), and the errors
said nothing about the formats.

Error: ‖out − ref‖ / ‖ref‖ of one forward's video and audio velocities (demo inputs: sigma 0.7, 17×64×96 video,
16 text tokens).
Bytes: the block linears' stored bytes (weights and scales) per weight, and the released LTX-2.3 transformer's
total bytes in that format per parameter (`memory.plan.transformer_weight_bytes`, what the memory plan counts).

The GGUF K types (Q6_K ... Q2_K, as the _M mixes of `memory.weight_layout.GGUF_MIXES`) have no quantiser in the
`gguf` package (0.19): `tests/support/gguf_quantise.py` quantises them with plain min-max scales, without
llama.cpp's search for the best scale, so their errors are upper bounds of a real file's. NVFP4 loads for text
encoders only.

    python bench/quant_accuracy.py [--version 2.3] [--seeds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from ltx2_core import load_transformer  # noqa: E402
from ltx2_core.demo import demo_inputs, demo_transformer  # noqa: E402
from ltx2_core.memory.plan import transformer_weight_bytes  # noqa: E402
from ltx2_core.memory.weight_layout import GGUF_MIXES, GgufMix, gguf_layers, policy_layers  # noqa: E402
from ltx2_core.quant.int8 import INT8_CONVROT, INT8_ROWWISE, INT8_TENSORWISE  # noqa: E402
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT  # noqa: E402
from ltx2_core.quant.nvfp4 import NVFP4_FORMAT  # noqa: E402
from ltx2_core.quant.policy import quantised_linear  # noqa: E402
from support.configs import released_transformer_configs  # noqa: E402
from support.quant_models import wide_tiny, write_comfy_file, write_gguf  # noqa: E402

CONVROT256 = next(f for f in INT8_CONVROT if f.convrot == 256)
COMFY = {"int8 tensorwise": ("int8_tensorwise", INT8_TENSORWISE), "int8 rowwise": ("int8_rowwise", INT8_ROWWISE),
         "int8 ConvRot/256": ("int8_convrot", CONVROT256), "MXFP8": ("mxfp8", MXFP8_FORMAT),
         "NVFP4": ("nvfp4", NVFP4_FORMAT), "fp8 (per tensor)": ("float8_e4m3fn", None)}
GGUF = ("Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "Q3_K_M", "Q2_K")


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).norm() / want.norm())


@torch.no_grad()
def probe_model(version: str, seed: int):
    """The wide tiny transformer with each linear's weights at a standard deviation of 1/√(inputs)."""
    model = demo_transformer(wide_tiny(version), seed=seed)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight.mul_(module.in_features ** -0.5 / module.weight.std())
    return model


def _load(name: str, model, folder: Path):
    if name == "bf16":
        twin = probe_model(model.config.version.value, 0)
        twin.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
        return twin
    if name.startswith("GGUF "):
        path = folder / f"{name[5:]}.gguf"
        write_gguf(path, model, GGUF_MIXES.get(name[5:], GgufMix(name[5:])))
    else:
        path = folder / f"{COMFY[name][0]}.safetensors"
        write_comfy_file(path, model, COMFY[name][0], dtype=torch.float32)
    return load_transformer(path, dtype=torch.float32)


def block_bits(model) -> float:
    """Stored bits per weight of the first block's policy linears (weights and scales)."""
    stored = count = 0
    for name, module in model.transformer_blocks[0].named_modules():
        if quantised_linear(f"transformer_blocks.0.{name}"):
            tensors = [t for n, t in [*module.named_parameters(), *module.named_buffers()] if n != "bias"
                       and t is not None]
            stored += sum(t.numel() * t.element_size() for t in tensors)
            count += module.in_features * module.out_features
    return 8 * stored / count


def released_bytes_per_parameter(name: str, version: str) -> float:
    config = released_transformer_configs()[version]
    params = transformer_weight_bytes(config, torch.float32).total / 4
    if name == "bf16":
        weights = transformer_weight_bytes(config)
    elif name.startswith("GGUF "):
        weights = transformer_weight_bytes(config, layers=gguf_layers(name[5:]))
    elif COMFY[name][1] is None:
        weights = transformer_weight_bytes(config, fp8=True)
    else:
        weights = transformer_weight_bytes(config, layers=policy_layers(COMFY[name][1]))
    return weights.total / params


def measure(version: str = "2.3", seeds: int = 3, names=None) -> dict[str, dict]:
    """name -> {video, audio: mean relative error over `seeds` models; bits: block linears' bits per weight}."""
    names = names or ["bf16", *(f"GGUF {t}" for t in GGUF), *COMFY]
    results = {n: {"video": 0.0, "audio": 0.0} for n in names}
    with tempfile.TemporaryDirectory() as folder, torch.no_grad():
        for seed in range(seeds):
            model = probe_model(version, seed)
            inputs = demo_inputs(model, text_tokens=16, seed=seed)
            want = model(*inputs)
            for name in names:
                quantised = _load(name, model, Path(folder))
                got = quantised(*inputs)
                results[name]["video"] += relative(got[0], want[0]) / seeds
                results[name]["audio"] += relative(got[1], want[1]) / seeds
                results[name]["bits"] = 16.0 if name == "bf16" else block_bits(quantised)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="2.3")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    results = measure(args.version, args.seeds)
    print(f"| format | video error | audio error | bits per weight (block linears) | "
          f"bytes per parameter (released {args.version}) |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['video']:.2e} | {r['audio']:.2e} | {r['bits']:.2f} | "
              f"{released_bytes_per_parameter(name, args.version):.3f} |")


if __name__ == "__main__":
    main()
