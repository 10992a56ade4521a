"""Tiny video VAEs with random weights, ours and the reference's holding the same tensors."""

from __future__ import annotations

import torch

from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
from support.reference import import_ltx_core


def random_state(module: torch.nn.Module, seed: int, gain: float = 1.0) -> dict[str, torch.Tensor]:
    """Seeded random values for every tensor: weights N(0, gain²/fan-in) so activations stay O(1) through the
    stages, biases N(0, 0.1²), statistics std ~1.1 and mean ~0.3 so that un-normalising matters."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in module.state_dict().items():
        noise = torch.randn(value.shape, generator=generator)
        if name.endswith("std-of-means"):
            state[name] = 1.0 + 0.3 * noise.abs()
        elif name.endswith("mean-of-means"):
            state[name] = 0.3 * noise
        elif name.endswith("timestep_scale_multiplier"):
            state[name] = torch.tensor(1000.0)
        elif value.dim() >= 2:
            state[name] = noise * gain / value[0].numel() ** 0.5
        else:
            state[name] = 0.1 * noise
    return state


def random_video_vae(section: dict, part: str, seed: int = 0) -> VideoDecoder | VideoEncoder:
    """Our decoder or encoder for a `vae` metadata section with `random_state` weights, fp32 eval."""
    ours = (VideoDecoder if part == "decoder" else VideoEncoder)(VideoVaeConfig.from_metadata(section))
    ours.load_state_dict(random_state(ours, seed), strict=True)
    return ours.eval()


def video_vae_pair(section: dict, part: str, seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(ours, reference) decoder or encoder for a `vae` metadata section, same random weights, fp32 eval."""
    import_ltx_core()
    from ltx_core.model.video_vae import VideoDecoderConfigurator, VideoEncoderConfigurator

    ours = random_video_vae(section, part, seed)
    configurator = VideoDecoderConfigurator if part == "decoder" else VideoEncoderConfigurator
    ref = configurator.from_config({"vae": section})
    ref.load_state_dict(ours.state_dict(), strict=True)
    return ours, ref.float().eval()
