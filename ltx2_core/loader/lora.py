"""LoRA files fused into the transformer's weights: `W ← W + strength · (alpha / rank) · B @ A`, in fp32.

Key layouts accepted (the prefix `diffusion_model.` of ComfyUI-format files is optional):
`<target>.lora_A.weight` / `<target>.lora_B.weight` (PEFT, Lightricks' releases) or `<target>.lora_down.weight` /
`<target>.lora_up.weight` (kohya), with an optional scalar `<target>.alpha`; without alpha the scale is 1 (as in the
reference, which ignores alpha). `<target>.weight` must be a weight of the DiT with shape (rows of B, columns of A).
The whole file is checked before any weight changes. Targets on the text path (connectors, text projection) are
reported and skipped, like the reference does; anything else unknown is an error.

Fusion is exact up to one rounding of the sum to the weight's dtype (the reference adds a bf16 delta to a bf16
weight). A quantised weight takes the LoRA by its format's rule: formats with `lora_per_call` (GGUF, int8, MXFP8,
NVFP4) keep their bytes and carry the factors, added after dequantisation at each call (`quant.low_rank`; strength 0
attaches nothing); fp8 is dequantised, updated and quantised again (as the reference). `fused_loras` restores the
touched weights afterwards from copies kept on the CPU and detaches what it attached, bit for bit.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import torch
from torch import nn

from ltx2_core.errors import CheckpointError
from ltx2_core.loader.safetensors_file import SafetensorsFile, Shard, read_header, read_tensors
from ltx2_core.quant import low_rank
from ltx2_core.quant.registry import QuantModule, quantised_modules

log = logging.getLogger(__name__)

PREFIX = "diffusion_model."
_PAIRS = ((".lora_A.weight", ".lora_B.weight"), (".lora_down.weight", ".lora_up.weight"))
TEXT_PATH = ("video_embeddings_connector.", "audio_embeddings_connector.", "text_embedding_projection.")


class LoraError(CheckpointError):
    """A LoRA file does not fit the model it is applied to."""


class LoraPair(NamedTuple):
    """One low-rank update of `<target>.weight`: down (rank, in), up (out, rank), scale alpha / rank (or 1)."""

    down: torch.Tensor
    up: torch.Tensor
    scale: float


class Lora(NamedTuple):
    """A LoRA file's updates by the model parameter they change (e.g. `transformer_blocks.0.attn1.to_q.weight`)."""

    name: str
    pairs: dict[str, LoraPair]
    path: str | None = None  # the file it was read from (what multi-device workers are sent)


def shard_lora(lora: Lora, shards: Mapping[str, Shard]) -> Lora:
    """The LoRA's updates of a rank's shards: W[rows] += B[rows]·A, W[:, cols] += B·A[:, cols]."""
    if not shards:
        return lora
    pairs = {}
    for target, pair in lora.pairs.items():
        shard = shards.get(target)
        if shard is None:
            pairs[target] = pair
        elif shard.dim == 0:
            pairs[target] = pair._replace(up=shard.of(pair.up))
        else:
            pairs[target] = pair._replace(down=shard.of(pair.down))
    return lora._replace(pairs=pairs)


def load_lora(path: str | os.PathLike) -> Lora:
    """Reads a LoRA .safetensors file (only safetensors, never pickles) into CPU fp32 pairs."""
    file = read_header(path, "LoRA")
    pairs = {}
    for target, names in _pair_names(file).items():
        tensors = read_tensors(file, names, dtype=torch.float32)
        alpha = tensors.get("alpha")
        scale = 1.0 if alpha is None else float(alpha.reshape(-1)[0]) / tensors["down"].shape[0]
        pairs[target] = LoraPair(tensors["down"], tensors["up"], scale)
    return Lora(file.path.name, pairs, str(file.path))


def check_lora_file(path: str | os.PathLike, model: nn.Module) -> None:
    """LoraError naming the file when the LoRA at `path` does not fit `model` (e.g. the transformer built on meta
    from a checkpoint's config): `check_lora`'s checks of every target and shape, from the file's header alone."""
    file = read_header(path, "LoRA")
    pairs = {target: LoraPair(*(torch.empty(file.tensors[names[half]].shape, device="meta")
                                for half in ("down", "up")), 1.0)
             for target, names in _pair_names(file).items()}
    check_lora(model, Lora(file.path.name, pairs, str(file.path)))


def _pair_names(file: SafetensorsFile) -> dict[str, dict[str, str]]:
    """Target weight (e.g. `transformer_blocks.0.attn1.to_q.weight`) -> the file's tensor names of its "down",
    "up" and optional "alpha"; LoraError when a key has no partner or there is no pair."""
    keys = {name[len(PREFIX):] if name.startswith(PREFIX) else name: name for name in file.tensors}
    pairs, used = {}, set()
    for key in keys:
        for down_suffix, up_suffix in _PAIRS:
            if key.endswith(down_suffix) and key[: -len(down_suffix)] + up_suffix in keys:
                target = key[: -len(down_suffix)]
                names = {"down": key, "up": target + up_suffix}
                if target + ".alpha" in keys:
                    names["alpha"] = target + ".alpha"
                pairs[target + ".weight"] = {half: keys[name] for half, name in names.items()}
                used.update(names.values())
    leftover = sorted(set(keys) - used)
    if leftover or not pairs:
        raise LoraError(f"{file.path}: not a LoRA file this package reads ({len(leftover)} keys without a "
                        f"lora_A/lora_B or lora_down/lora_up partner, e.g. {leftover[:3]}); use a LoRA trained "
                        "for LTX-2 in the PEFT or ComfyUI layout")
    return pairs


def check_lora(model: nn.Module, lora: Lora) -> dict[str, LoraPair]:
    """The pairs that apply to `model` after checking every target and shape; text-path targets are skipped."""
    params, modules = dict(model.named_parameters()), dict(model.named_modules())
    applied, skipped, problems = {}, [], []
    for target, pair in lora.pairs.items():
        if target.startswith(TEXT_PATH):
            skipped.append(target)
            continue
        weight = params.get(target)
        if weight is None or weight.dim() != 2:
            problems.append(f"{target} is not a weight matrix of this model")
            continue
        layer = modules.get(target.rsplit(".", 1)[0])  # a quantised layer stores its (out, in) weight packed
        shape = (layer.out_features, layer.in_features) if hasattr(layer, "in_features") else tuple(weight.shape)
        if pair.down.dim() != 2 or pair.up.dim() != 2 or pair.up.shape[1] != pair.down.shape[0] or \
                (pair.up.shape[0], pair.down.shape[1]) != shape:
            problems.append(f"{target}: up {list(pair.up.shape)} @ down {list(pair.down.shape)} does not give "
                            f"{list(shape)}")
        else:
            applied[target] = pair
    if problems:
        raise LoraError(f"LoRA {lora.name} does not fit this model ({len(problems)} problems: "
                        f"{'; '.join(problems[:3])}); it was trained for another model or version, pick a LoRA made "
                        "for this checkpoint")
    if skipped:
        log.warning("LoRA %s: %d updates of the text connectors are not applied (the reference drops them too)",
                    lora.name, len(skipped))
    return applied


def _deltas(model: nn.Module, loras: Sequence[tuple[Lora, float]]) -> dict[str, list[tuple[LoraPair, float]]]:
    for _, strength in loras:
        if not math.isfinite(strength):
            raise ValueError(f"LoRA strength must be a finite number, got {strength}")
    by_target: dict[str, list[tuple[LoraPair, float]]] = {}
    for lora, strength in loras:
        for target, pair in check_lora(model, lora).items():
            by_target.setdefault(target, []).append((pair, strength))
    return by_target


@torch.no_grad()
def fuse_loras(model: nn.Module, loras: Sequence[tuple[Lora, float]]) -> list[str]:
    """Adds every LoRA's update, times its strength, to the model's weights in place; returns the changed names.
    All files are checked first, so a bad one leaves the model untouched."""
    return _fuse(model, _deltas(model, loras), slot="lora")


def _settle(model: nn.Module) -> None:
    """Streamed blocks (`memory.streaming`, which keeps its streamer as `model.block_streamer`) are updated in host
    memory once no copy of them is in flight; asked by attribute, as memory/ sits above the loader."""
    streamer = getattr(model, "block_streamer", None)
    if streamer is not None:
        streamer.settle()


def _per_call(owner: QuantModule | None) -> bool:
    return owner is not None and getattr(owner.format, "lora_per_call", False)


def _compute_dtype(model: nn.Module) -> torch.dtype:
    """The dtype the model computes in: that of its first floating parameter wider than a byte (fp32 if none)."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point() and p.element_size() > 1),
                torch.float32)


def _attach(model: nn.Module, module: nn.Module, updates: list[tuple[LoraPair, float]], dtype: torch.dtype,
            slot: str) -> None:
    """The updates' factors beside a quantised layer (strength · scale folded into up), on the device the layer
    computes on (a streamed block's: the streamer's, its weights resting on the host)."""
    streamer = getattr(model, "block_streamer", None)
    device = module.weight.device if streamer is None else streamer.device
    down = torch.cat([pair.down for pair, _ in updates])
    up = torch.cat([pair.up * (strength * pair.scale) for pair, strength in updates], dim=1)
    low_rank.attach(module, down.to(device, dtype), up.to(device, dtype), slot)


def _fuse(model: nn.Module, deltas: dict[str, list[tuple[LoraPair, float]]], slot: str = "stage_lora") -> list[str]:
    """A quantised weight takes the update by its format's LoRA rule: factors attached in `slot` (`lora_per_call`;
    see `quant.low_rank.SLOTS`), or dequantised, updated and stored back (fp8: quantised again with a fresh scale)."""
    _settle(model)
    params, quantised, dtype = dict(model.named_parameters()), quantised_modules(model), _compute_dtype(model)
    for target, updates in deltas.items():
        updates = [(pair, strength) for pair, strength in updates if strength != 0]
        if not updates:  # strength 0 touches nothing (fp8 would otherwise be requantised): exactly the base weights
            continue
        weight, owner = params[target], quantised.get(target.rsplit(".", 1)[0])
        if _per_call(owner):
            _attach(model, owner.module, updates, dtype, slot)
            continue
        total = owner.format.dequantize(owner.module, torch.float32) if owner is not None else weight.float()
        for pair, strength in updates:
            total.addmm_(pair.up.to(weight.device), pair.down.to(weight.device), alpha=strength * pair.scale)
        if owner is not None:
            owner.format.fuse_(owner.module, total)
        else:
            weight.copy_(total)
    return sorted(t for t, updates in deltas.items() if any(strength != 0 for _, strength in updates))


@contextlib.contextmanager
def fused_loras(model: nn.Module, loras: Sequence[tuple[Lora, float]]) -> Iterator[nn.Module]:
    """The model with the LoRAs fused for the duration of the block; the original weights (kept on the CPU) are
    restored afterwards and the factors attached to quantised layers detached (back to what they carried before),
    also when the block fails."""
    deltas = _deltas(model, loras)
    state = dict(model.named_parameters()) | dict(model.named_buffers())
    quantised = quantised_modules(model)  # fusing into a quantised weight also changes its scales
    owners = {t: (t.rsplit(".", 1)[0], quantised.get(t.rsplit(".", 1)[0])) for t in deltas}
    carried = {id(owner.module): (owner.module, low_rank.attached(owner.module))
               for _, owner in owners.values() if _per_call(owner)}
    fused = [t for t, (_, owner) in owners.items() if not _per_call(owner)]
    scales = [f"{owners[t][0]}.{scale}" for t in fused if owners[t][1] is not None
              for scale in owners[t][1].format.scales]
    touched = [*fused, *(name for name in scales if name in state)]
    originals = {name: state[name].detach().to("cpu", copy=True) for name in touched}
    try:
        with torch.no_grad():
            _fuse(model, deltas)
        yield model
    finally:
        _settle(model)
        with torch.no_grad():
            for name, original in originals.items():
                state[name].copy_(original)
        for module, factors in carried.values():
            low_rank.set_attached(module, factors)


DOWNSCALE_KEY = "reference_downscale_factor"  # an IC-LoRA's control video size: the generation's / this factor
TEMPORAL_KEY = "reference_temporal_scale_factor"  # 1.2.0: a control video subsampled in time (not yet supported)


def lora_reference_scale(path: str | os.PathLike) -> int | None:
    """The `reference_downscale_factor` an IC-LoRA file states in its safetensors metadata (None: it states none,
    the reference then takes 1). ValueError naming the fix for a value that is not an integer ≥ 1, and for a
    `reference_temporal_scale_factor` other than 1 (1.2.0's temporal subsampling, not supported yet)."""
    metadata = read_header(path, "LoRA").metadata
    factors = {}
    for key in (DOWNSCALE_KEY, TEMPORAL_KEY):
        text = metadata.get(key)
        if text is None:
            continue
        try:
            factors[key] = int(text)
        except ValueError:
            factors[key] = 0
        if factors[key] < 1:
            raise ValueError(f"LoRA {path} states {key}={text!r} in its metadata; it must be an integer ≥ 1: fix "
                             "the file's metadata or use the IC-LoRA as released")
    if factors.get(TEMPORAL_KEY, 1) != 1:
        raise ValueError(f"LoRA {path} asks for its control video subsampled in time ({TEMPORAL_KEY}="
                         f"{factors[TEMPORAL_KEY]}), which this version does not do yet; use an IC-LoRA without it")
    return factors.get(DOWNSCALE_KEY)


def reference_downscale_factor(paths: Sequence[str | os.PathLike]) -> int:
    """The one control-video downscale factor of the LoRAs at `paths` (1 where none states one, as the reference);
    ValueError naming both files when two state different factors (their control videos cannot share one size).
    Where none states one, a warning says so: an IC-LoRA released without the metadata and a plain LoRA (which
    cannot read a control video) look alike, and both guide at factor 1."""
    factor, source, stated = 1, None, False
    for path in paths:
        scale = lora_reference_scale(path)
        stated = stated or scale is not None
        if scale is None or scale == 1:
            continue
        if source is not None and scale != factor:
            raise ValueError(f"LoRA {source} wants control videos at 1/{factor} of the generation's size and LoRA "
                             f"{path} at 1/{scale}; IC-LoRAs of different {DOWNSCALE_KEY} cannot be combined: "
                             "use one of them")
        factor, source = scale, path
    if paths and not stated:
        log.warning("control videos: none of the LoRAs (%s) states a %s; each is taken as an IC-LoRA at factor 1. "
                    "A plain LoRA (style, distilled) cannot read a control video: add the IC-LoRA (depth, pose, "
                    "canny) if it is missing", ", ".join(os.path.basename(os.fspath(p)) for p in paths), DOWNSCALE_KEY)
    return factor


_GATE, _ATTENTION = ".to_gate_logits.", (".attn1.to_q.", ".attn2.to_q.")


def check_distilled_lora(lora: Lora | str | os.PathLike, gated: bool | None = None) -> None:
    """LoraError naming the fix for a LoRA that cannot be the distilled LoRA refining a two-stage run's second
    stage: an IC-LoRA (its file states a reference_downscale_factor: a control LoRA, for stage 1 with a video
    guide). For a model with gated attention (`gated`: LTX-2.3, 2.5), a warning for one that updates the blocks'
    attention and none of its gates, as a LoRA made for LTX-2.0 (whose blocks have none) does: it fits the shapes
    and runs, and nothing in the file proves its release, so it is stated, not refused. `lora` a loaded Lora or a
    file (headers only); `gated` None: the model is not known yet."""
    path = lora.path if isinstance(lora, Lora) else lora
    name = lora.name if isinstance(lora, Lora) else os.path.basename(os.fspath(lora))
    if path is not None and lora_reference_scale(path) is not None:
        raise LoraError(f"{name} is an IC-LoRA (its metadata states a {DOWNSCALE_KEY}), which steers stage 1 from a "
                        "control video and cannot refine stage 2: pick the release's distilled LoRA "
                        "(ltx-2*-distilled-lora-384*.safetensors) as the distilled LoRA, and load an IC-LoRA with "
                        "the LoRA loader beside a video guide")
    if not gated:
        return
    targets = lora.pairs if isinstance(lora, Lora) else read_header(path, "LoRA").tensors
    if any(part in t for t in targets for part in _ATTENTION) and not any(_GATE in t for t in targets):
        log.warning("distilled LoRA %s updates the attention of the transformer blocks and none of their gates "
                    "(to_gate_logits), as a LoRA made for LTX-2.0 (whose blocks have none) does; this model is "
                    "LTX-2.3 or later: if the refined video looks wrong, pick its own distilled LoRA "
                    "(ltx-2.3-22b-distilled-lora-384*.safetensors for 2.3)", name)


def split_ic_loras(loras: Sequence[tuple[Lora, float]], controls: bool = False
                   ) -> tuple[tuple[tuple[Lora, float], ...], tuple[tuple[Lora, float], ...]]:
    """(the LoRAs for every stage, the IC-LoRAs for the first stage only) of loaded LoRAs: an IC-LoRA is a file
    whose metadata states a reference_downscale_factor (the reference's ICLoraPipeline refines stage 2 without it);
    a LoRA read from no file counts as a plain one. `controls` (a run with control videos): every LoRA is the
    IC-LoRA pipeline's, stage 1 only, as the reference's (`ModelFiles.controls`). Headers only."""
    if controls:
        return (), tuple(loras)
    ic = tuple(pair for pair in loras if pair[0].path is not None and lora_reference_scale(pair[0].path) is not None)
    return tuple(pair for pair in loras if not any(pair is other for other in ic)), ic
