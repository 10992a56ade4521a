"""Tiny LTX-2.5 video VAE files with random weights, in the released layout: the diffusion decoder's (fused qkv,
static gates, `t_embedder.mlp.*`, a `coarse_*` preview head) and the convolutional one's, each with the `config`
metadata (`vae._class_name` and its section) the loaders read."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder

TINY_DIFFUSION_VAE = {
    "_class_name": "CausalDiffusionVAE", "latent_channels": 16, "model_output_type": "v",
    "decoder": {"head_dim": 16, "stage_channels": [128, 64, 32, 32, 16], "stage_depths": [1, 1, 1, 1, 2],
                "stage_kernels": [[3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3]], "stage5_kernel": [3, 5, 5],
                "stage5_channels": 32, "t_emb_dim": 32, "default_num_inference_steps": 2,
                "timestep_scale_multiplier": 1000.0},
    # the convolutional encoder both 2.5 VAE files carry, nested as 1.2.0 reads it (`blocks`; without `out_channels`
    # its latent width is the section's `latent_channels`, so a copy with 128 fits the tiny transformers); multiplier
    # 1 keeps its width at the latent's
    "encoder": {"blocks": [["res_x", {"num_layers": 1}], ["compress_all_res", {"multiplier": 1}],
                           ["compress_time_res", {"multiplier": 1}], ["compress_space_res", {"multiplier": 1}],
                           ["compress_all_res", {"multiplier": 1}]],
                "norm_layer": "pixel_norm", "latent_log_var": "uniform"},
}
# a bottleneck of 4× the base width (multipliers 2·2·1): 1.2.0 computes it from the blocks, 1.0.0 fixed 8×
TINY_CONV_VAE25 = {
    "_class_name": "CausalVideoAutoencoder", "dims": 3, "latent_channels": 16, "out_channels": 3, "patch_size": 4,
    "norm_layer": "pixel_norm", "latent_log_var": "uniform", "spatial_padding_mode": "zeros",
    "causal_decoder": False, "timestep_conditioning": False, "decoder_base_channels": 8,
    "decoder_blocks": [["res_x", {"num_layers": 1}], ["compress_all", {"multiplier": 2}],
                       ["res_x", {"num_layers": 1}], ["compress_time", {"multiplier": 1}],
                       ["res_x", {"num_layers": 1}], ["compress_space", {"multiplier": 2}],
                       ["compress_all", {"multiplier": 1}]],
    "encoder_blocks": [["res_x", {"num_layers": 1}], ["compress_all_res", {"multiplier": 2}],
                       ["compress_time_res", {"multiplier": 1}], ["compress_space_res", {"multiplier": 2}],
                       ["compress_all_res", {"multiplier": 1}]],
}


def _random(module: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Matrices N(0, 1/fan-in), norm weights 1 ± 0.1, biases and modulation tables N(0, 0.1²), statistics std
    ~1.1 and mean ~0.3 so that un-normalising matters."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in module.state_dict().items():
        noise = torch.randn(value.shape, generator=generator)
        if name.endswith("std-of-means"):
            state[name] = 1.0 + 0.3 * noise.abs()
        elif name.endswith("mean-of-means"):
            state[name] = 0.3 * noise
        elif name.endswith("norm.weight") or "norm1." in name or "norm2." in name or "_norm." in name:
            state[name] = 1.0 + 0.1 * noise
        elif value.dim() >= 2 and not name.endswith("scale_shift_table"):
            state[name] = noise / value[0].numel() ** 0.5
        else:
            state[name] = 0.1 * noise
    return state


def diffusion_file_state(section: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """The decoder's tensors as the released file stores them (without prefix): fused qkv, `t_embedder.mlp.*`,
    static gates (C,) beside each stage-5 block, and a preview head the loader must drop."""
    state = _random(DiffusionVideoDecoder(DiffusionDecoderConfig.from_metadata(section)), seed)
    generator = torch.Generator().manual_seed(seed + 1)
    out = {}
    for key, value in state.items():
        key = key.replace("t_embedder.timestep_embedder.linear_1.", "t_embedder.mlp.0.")
        key = key.replace("t_embedder.timestep_embedder.linear_2.", "t_embedder.mlp.2.")
        if ".qkv.to_q." in key:
            leaf = key.rsplit(".", 1)[1]
            stem = key.split(".qkv.to_q.")[0]
            parts = [state[key], state[key.replace("to_q", "to_k")], state[key.replace("to_q", "to_v")]]
            out[f"{stem}.qkv.{leaf}"] = torch.cat(parts)
        elif ".qkv.to_" not in key:
            out[key] = value
        if key.endswith(".context_proj.weight"):
            stem, width = key[:-len(".context_proj.weight")], value.shape[0]
            for gate in ("gate_msa", "gate_mlp", "gate_ctx"):
                out[f"{stem}.{gate}"] = 1.0 + 0.3 * torch.randn(width, generator=generator)
    out["coarse_head.weight"] = torch.randn(3, 8, generator=generator)
    return out


def _write(path: Path, tensors: dict[str, torch.Tensor], section: dict, version: str | None) -> Path:
    metadata = {"config": json.dumps({"vae": section})}
    if version is not None:
        metadata["model_version"] = version
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


def write_diffusion_vae(path: Path, section: dict = TINY_DIFFUSION_VAE, seed: int = 0, prefix: str = "",
                        version: str | None = "2.5.0") -> Path:
    """A tiny diffusion video VAE file: decoder tensors under `prefix` + "decoder.", its convolutional encoder's under
    `prefix` + "encoder.", statistics under `prefix` + "per_channel_statistics." (bare by default, as a VAE file of
    its own)."""
    state = diffusion_file_state(section, seed)
    tensors = {(prefix + "per_channel_statistics." + k.split(".", 1)[1]) if k.startswith("per_channel_statistics.")
               else prefix + "decoder." + k: v for k, v in state.items()}
    if "encoder" in section:  # its encoder, beside the decoder's statistics (one copy serves both)
        encoder = VideoEncoder(VideoVaeConfig.encoder_from_metadata(section))
        tensors |= {prefix + "encoder." + k: v for k, v in _random(encoder, seed + 2).items()
                    if not k.startswith("per_channel_statistics.")}
    return _write(path, tensors, section, version)


def write_conv_vae25(path: Path, section: dict = TINY_CONV_VAE25, seed: int = 0, prefix: str = "",
                     version: str | None = "2.5.0") -> Path:
    """A tiny convolutional LTX-2.5 video VAE file (encoder, decoder with a 4× bottleneck, statistics)."""
    config = VideoVaeConfig.from_metadata(section)
    tensors = {}
    for part, module, offset in (("decoder.", VideoDecoder(config), 0), ("encoder.", VideoEncoder(config), 1)):
        for key, value in _random(module, seed + offset).items():
            if key.startswith("per_channel_statistics."):
                tensors[prefix + key] = value  # one copy: both halves hold the same statistics
            else:
                tensors[prefix + part + key] = value
    return _write(path, tensors, section, version)
