"""Configuration of the video VAE (spec §3), read from the checkpoint's `vae` metadata section.

Both released VAEs (LTX-2.0 and LTX-2.3) are described by block lists (`encoder_blocks`, `decoder_blocks`) whose
entries are `[name, {params}]`; the decoder list is written from the pixel side and built in reverse. The defaults
below are the reference configurator's, so a section that omits a key means what it means there (notably the
decoder's spatial padding defaults to `reflect` while the encoder's defaults to `zeros`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx2_core.errors import ConfigError
from ltx2_core.geometry import VIDEO_SPACE_SCALE as SCALE_SPACE, VIDEO_TIME_SCALE as SCALE_TIME

ENCODER_BLOCKS = {"res_x": None, "compress_space_res": (1, 2, 2), "compress_time_res": (2, 1, 1),
                  "compress_all_res": (2, 2, 2)}
DECODER_BLOCKS = {"res_x": None, "compress_space": (1, 2, 2), "compress_time": (2, 1, 1), "compress_all": (2, 2, 2)}
PADDING_MODES = ("zeros", "reflect")
LOG_VARIANCE_CHANNELS = {"uniform": 1, "constant": 1, "per_channel": None, "none": 0}  # extra conv_out channels


@dataclass(frozen=True)
class VaeBlock:
    """One entry of a block list: a stack of `layers` residual blocks, or a ×2 resampling by `stride`."""

    kind: str
    layers: int = 0  # res_x only
    stride: tuple[int, int, int] = (1, 1, 1)  # (time, height, width); (1, 1, 1) for res_x
    multiplier: int = 1  # channel factor of a resampling block (encoder: ×, decoder: ÷)
    residual: bool = False  # decoder compress_all only (the reference ignores it elsewhere): add the input's d2s


@dataclass(frozen=True)
class VideoVaeConfig:
    latent_channels: int = 128
    in_channels: int = 3
    out_channels: int = 3
    patch_size: int = 4
    encoder_blocks: tuple[VaeBlock, ...] = ()
    decoder_blocks: tuple[VaeBlock, ...] = ()  # in execution order (latent side first)
    decoder_base_channels: int = 128
    encoder_padding: str = "zeros"
    decoder_padding: str = "reflect"
    log_variance: str = "uniform"
    causal_decoder: bool = False
    timestep_conditioning: bool = False

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any], *, decoder: bool = True) -> VideoVaeConfig:
        """Builds the config from the `vae` section; every unsupported value is reported in one ConfigError.
        `decoder` False: the encoder's fields only (no decoder blocks are read or checked)."""
        problems: list[str] = []
        get = section.get
        for key, supported in (("dims", 3), ("norm_layer", "pixel_norm")):
            if get(key, supported) != supported:
                problems.append(f"{key}={get(key)!r} (supported: {supported!r})")
        padding = get("spatial_padding_mode")
        if padding is not None and padding not in PADDING_MODES:
            problems.append(f"spatial_padding_mode={padding!r} (supported: {', '.join(PADDING_MODES)})")
        log_variance = get("latent_log_var", "uniform")
        if log_variance not in LOG_VARIANCE_CHANNELS:
            problems.append(f"latent_log_var={log_variance!r} (supported: {', '.join(LOG_VARIANCE_CHANNELS)})")
        encoder = _blocks(get("encoder_blocks", []), ENCODER_BLOCKS, "encoder_blocks", problems)
        decoder = _blocks(get("decoder_blocks", []), DECODER_BLOCKS, "decoder_blocks", problems) if decoder else ()
        if problems:
            raise ConfigError("unsupported video VAE config: " + "; ".join(problems)
                              + ". Use the `vae` section of an official LTX-2 / LTX-2.3 checkpoint.")
        config = cls(
            latent_channels=get("latent_channels", 128), in_channels=get("in_channels", 3),
            out_channels=get("out_channels", 3), patch_size=get("patch_size", 4),
            encoder_blocks=encoder, decoder_blocks=tuple(reversed(decoder)),
            decoder_base_channels=get("decoder_base_channels", 128),
            encoder_padding=padding or "zeros", decoder_padding=padding or "reflect", log_variance=log_variance,
            causal_decoder=bool(get("causal_decoder", False)),
            timestep_conditioning=bool(get("timestep_conditioning", True)),
        )
        config.validate()
        return config

    @classmethod
    def encoder_from_metadata(cls, section: Mapping[str, Any]) -> VideoVaeConfig:
        """The encoder's config from a `vae` section: flat in every convolutional VAE; in an LTX-2.5 diffusion VAE
        file nested under `encoder`, with `blocks` for the block list and `out_channels` for the latent width, as
        ltx-core 1.2.0 reads it (padding from the nested `spatial_padding_mode`, else the section's
        `encoder_spatial_padding_mode`, else zeros)."""
        nested = section.get("encoder")
        if not isinstance(nested, Mapping):
            return cls.from_metadata(section)
        flat = {key: nested.get(key, section.get(key)) for key in ("dims", "in_channels", "patch_size", "norm_layer",
                                                                    "latent_log_var")}
        flat = {key: value for key, value in flat.items() if value is not None}
        flat["latent_channels"] = nested.get("out_channels", section.get("latent_channels", 128))
        flat["encoder_blocks"] = nested.get("blocks", nested.get("encoder_blocks", []))
        flat["spatial_padding_mode"] = nested.get("spatial_padding_mode",
                                                  section.get("encoder_spatial_padding_mode", "zeros"))
        return cls.from_metadata(flat, decoder=False)

    def validate(self) -> None:
        """Checks that the block lists compose to the ×8 time / ×32 space compression the pipelines assume (an
        encoder-only config has no decoder blocks to check)."""
        for name, blocks in (("encoder_blocks", self.encoder_blocks), ("decoder_blocks", self.decoder_blocks)):
            if not blocks and name == "decoder_blocks":
                continue
            time, space = _total_stride(blocks)
            if (time, space * self.patch_size) != (SCALE_TIME, SCALE_SPACE):
                raise ConfigError(
                    f"video VAE {name} compress ×{time} in time and ×{space * self.patch_size} in space; LTX-2 "
                    f"latents are ×{SCALE_TIME} / ×{SCALE_SPACE}. Use the `vae` section of an official checkpoint."
                )

    @property
    def decoder_channels(self) -> int:
        """Width after the decoder's conv_in: `decoder_base_channels` × the product of the upsampling blocks'
        multipliers, since each divides the width and the last ends at the base (ltx-core 1.2.0; 1.0.0 fixed 8×,
        the same for 2.0 / 2.3, whose multipliers are 2·2·2)."""
        channels = self.decoder_base_channels
        for block in self.decoder_blocks:
            channels *= block.multiplier
        return channels


def _total_stride(blocks: tuple[VaeBlock, ...]) -> tuple[int, int]:
    time = space = 1
    for block in blocks:
        time, space = time * block.stride[0], space * block.stride[1]
    return time, space


def _blocks(raw: Any, kinds: Mapping[str, tuple[int, int, int] | None], key: str,
            problems: list[str]) -> tuple[VaeBlock, ...]:
    if not isinstance(raw, (list, tuple)) or not raw:
        problems.append(f"{key} must be a non-empty list of [name, params]")
        return ()
    blocks = []
    for entry in raw:
        try:
            name, params = entry
        except (TypeError, ValueError):
            problems.append(f"{key} entry {entry!r} is not [name, params]")
            continue
        params = {"num_layers": params} if isinstance(params, int) else dict(params or {})
        if name not in kinds:
            problems.append(f"{key} block {name!r} (supported: {', '.join(kinds)})")
        elif params.get("inject_noise", False):
            problems.append(f"{key} block {name!r} with inject_noise=true (the released VAEs have none)")
        elif kinds[name] is None:
            blocks.append(VaeBlock(name, layers=int(params["num_layers"])))
        else:
            multiplier = int(params.get("multiplier", 2 if name.endswith("_res") else 1))
            residual = name == "compress_all" and bool(params.get("residual", False))
            blocks.append(VaeBlock(name, stride=kinds[name], multiplier=multiplier, residual=residual))
    return tuple(blocks)
