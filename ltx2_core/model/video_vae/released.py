"""The `vae` sections of the released LTX-2 and LTX-2.3 checkpoints (ltx-2-19b-dev, ltx-2.3-22b-dev; spec §3, §8):
the convolutional VAE's block structure at full width, for a VAE file that carries no `config` metadata (a file cut
out of a bundle without it), whose release its shapes then tell (`loader.vae_weights.released_vae_section`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def _released_vae(res: list[int], last_multiplier: int, decoder: list) -> dict[str, Any]:
    counts = iter(res)
    encoder = [["res_x", {"num_layers": next(counts)}]]
    for name, multiplier in (("compress_space_res", 2), ("compress_time_res", 2), ("compress_all_res", 2),
                             ("compress_all_res", last_multiplier)):
        encoder += [[name, {"multiplier": multiplier}], ["res_x", {"num_layers": next(counts)}]]
    return {"dims": 3, "in_channels": 3, "out_channels": 3, "latent_channels": 128, "patch_size": 4,
            "norm_layer": "pixel_norm", "latent_log_var": "uniform", "causal_decoder": False,
            "timestep_conditioning": False, "encoder_blocks": encoder, "decoder_blocks": decoder}


_RES5 = ["res_x", {"num_layers": 5, "inject_noise": False}]
_UP = {"residual": True, "multiplier": 2}
RELEASED_VAE_SECTIONS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "2.0": _released_vae([4, 6, 6, 2, 2], 2, [_RES5, ["compress_all", _UP]] * 3 + [_RES5]),
    "2.3": {
        **_released_vae([4, 6, 4, 2, 2], 1, [
            ["res_x", {"num_layers": 4}], ["compress_space", {"multiplier": 2}], ["res_x", {"num_layers": 6}],
            ["compress_time", {"multiplier": 2}], ["res_x", {"num_layers": 4}], ["compress_all", {"multiplier": 1}],
            ["res_x", {"num_layers": 2}], ["compress_all", {"multiplier": 2}], ["res_x", {"num_layers": 2}]]),
        "spatial_padding_mode": "zeros", "decoder_base_channels": 128,
    },
})
