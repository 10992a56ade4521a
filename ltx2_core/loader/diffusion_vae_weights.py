"""Loading the LTX-2.5 diffusion video decoder from its file (`config.vae._class_name` "CausalDiffusionVAE").

The file stores what training saved; three rewrites make it the module's state (as the reference loader does):
* each attention's fused `attn.qkv` (3·C rows, q then k then v) is split into `attn.qkv.to_q/to_k/to_v`;
* the timestep MLP `t_embedder.mlp.0/2` is `t_embedder.timestep_embedder.linear_1/2`;
* the stage-5 blocks' static gates `gate_msa`, `gate_mlp`, `gate_ctx` (C,) are folded row-wise, in fp32, into the
  layer each one scales (`attn.proj`, `mlp.w_down`, `context_proj`) and dropped; `coarse_*` (a preview head) is
  dropped too.
Keys and shapes are checked against the config before any tensor is read.
"""

from __future__ import annotations

import torch

from ltx2_core.errors import KeyMismatchError, ShapeMismatchError
from ltx2_core.loader.checkpoint import check_tensors
from ltx2_core.loader.components import section_config, statistics_keys
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_tensors
from ltx2_core.loader.sources import Component, Source
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder

RENAMES = (("t_embedder.mlp.0.", "t_embedder.timestep_embedder.linear_1."),
           ("t_embedder.mlp.2.", "t_embedder.timestep_embedder.linear_2."))
GATES = {".gate_msa": ".attn.proj.", ".gate_mlp": ".mlp.w_down.", ".gate_ctx": ".context_proj."}
FUSED, SPLIT = ".attn.qkv.", (".attn.qkv.to_q.", ".attn.qkv.to_k.", ".attn.qkv.to_v.")


def load_diffusion_decoder(file: SafetensorsFile, source: Source, *, device: torch.device | str = "cpu",
                           dtype: torch.dtype | None = None) -> DiffusionVideoDecoder:
    """The diffusion decoder with its latent statistics from `file` (the header of `source.path`)."""
    config = section_config(file, "vae", DiffusionDecoderConfig.from_metadata, Component.VIDEO_DECODER.value)
    with torch.device("meta"):
        model = DiffusionVideoDecoder(config)
    expected = _file_shapes(model)
    keys, gates = _file_keys(file, source.key("decoder."))
    keys |= statistics_keys(file, source.key("per_channel_statistics."))
    name = "diffusion video VAE decoder"
    check_tensors(file, keys, expected, component=name)
    _check_gates(file, gates, expected, name)
    state = read_tensors(file, {**keys, **gates}, device=device)
    for gate, target in ((g, g.rsplit(".", 1)[0] + GATES["." + g.rsplit(".", 1)[1]]) for g in gates):
        scale = state.pop(gate).float()
        for leaf, view in (("weight", scale[:, None]), ("bias", scale)):
            if target + leaf not in state:  # the MLP's w_down has no bias
                continue
            state[target + leaf] = (view * state[target + leaf].float()).to(state[target + leaf].dtype)
    for key in [k for k in state if k.endswith((FUSED + "weight", FUSED + "bias"))]:
        fused, leaf = state.pop(key), key.rsplit(".", 1)[1]
        stem = key[:-len(FUSED + leaf)]
        for suffix, part in zip(SPLIT, fused.chunk(3, dim=0)):
            state[stem + suffix + leaf] = part.contiguous()
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


def _file_shapes(model: DiffusionVideoDecoder) -> dict[str, tuple[int, ...]]:
    """The module's state shapes in the file's terms: q/k/v of each attention as one fused (3·C, …) tensor."""
    shapes: dict[str, tuple[int, ...]] = {}
    for key, value in model.state_dict().items():
        for index, suffix in enumerate(SPLIT):
            if suffix in key:
                fused = key.replace(suffix, FUSED)
                if index == 0:
                    shapes[fused] = (3 * value.shape[0], *value.shape[1:])
                break
        else:
            shapes[key] = tuple(value.shape)
    return shapes


def _file_keys(file: SafetensorsFile, prefix: str) -> tuple[dict[str, str], dict[str, str]]:
    """(module-side key -> file key for the weights, gate key -> file key for the static gates) under `prefix`."""
    keys, gates = {}, {}
    for name in file.tensors:
        if not name.startswith(prefix):
            continue
        key = name[len(prefix):]
        if key.startswith("coarse_"):
            continue
        for old, new in RENAMES:
            if key.startswith(old):
                key = new + key[len(old):]
        if any(key.endswith(gate) for gate in GATES):
            gates[key] = name
        else:
            keys[key] = name
    return keys, gates


def _check_gates(file: SafetensorsFile, gates: dict[str, str], expected: dict[str, tuple[int, ...]],
                 component: str) -> None:
    for gate, name in gates.items():
        stem, suffix = gate.rsplit(".", 1)
        target = stem + GATES["." + suffix] + "weight"
        if target not in expected:
            raise KeyMismatchError(f"{file.path}: gate {name!r} scales no layer of the {component} ({target} is not "
                                   "one); the file is from another model")
        if tuple(file.tensors[name].shape) != (expected[target][0],):
            raise ShapeMismatchError(f"{file.path}: gate {name!r} has shape {list(file.tensors[name].shape)}, the "
                                     f"{component} expects [{expected[target][0]}]")
