"""Configuration of the LTX-2.5 diffusion video decoder, read from a VAE file's `vae` metadata section.

Which decoder a `vae` section describes is its `_class_name`: "CausalVideoAutoencoder" (or none) is the
convolutional decoder of 2.0 / 2.3 / 2.5, anything else ("CausalDiffusionVAE") the diffusion decoder, whose
hyper-parameters sit under `vae.decoder` (or, in older configs, the section itself). Absent keys take the defaults
of the released model, as in the reference configurator; `model_output_type` is read at the `vae` level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx2_core.errors import ConfigError

CONV_VAE_CLASS = "CausalVideoAutoencoder"

Kernel = tuple[int, int, int]


def is_diffusion_vae(section: Mapping[str, Any]) -> bool:
    """True when a `vae` metadata section describes the diffusion decoder (its `_class_name` is not the conv one)."""
    return section.get("_class_name", CONV_VAE_CLASS) != CONV_VAE_CLASS


@dataclass(frozen=True)
class DiffusionDecoderConfig:
    latent_channels: int = 128
    out_channels: int = 3
    patch_size: int = 4
    head_dim: int = 64
    stage_channels: tuple[int, ...] = (1024, 512, 256, 256, 128)
    stage_depths: tuple[int, ...] = (4, 6, 4, 2, 8)  # the last is the stage-5 (diffusion) depth
    stage_kernels: tuple[Kernel, ...] = ((3, 7, 7), (3, 7, 7), (3, 5, 5), (3, 5, 5), (3, 3, 3))  # last unused
    upsamples: tuple[tuple[Kernel, int], ...] = (((1, 2, 2), 2), ((2, 1, 1), 2), ((2, 2, 2), 1), ((2, 2, 2), 2))
    stage5_kernel: Kernel = (3, 7, 7)
    stage5_channels: int | None = None  # default: the context width stage_channels[-1]
    t_emb_dim: int = 384
    steps: int = 2
    timestep_scale_multiplier: float = 1.0
    model_output_type: str = "v"

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any]) -> DiffusionDecoderConfig:
        """The config of a `vae` section with `_class_name` "CausalDiffusionVAE"; ConfigError naming every bad value."""
        if not is_diffusion_vae(section):
            raise ConfigError(f"this `vae` section describes the convolutional decoder ({CONV_VAE_CLASS}), not the "
                              "diffusion decoder; load it with load_video_decoder")
        decoder = section.get("decoder", section)
        get = decoder.get
        values: dict[str, Any] = {}
        for key in ("stage_channels", "stage_depths"):
            if key in decoder:
                values[key] = tuple(int(v) for v in decoder[key])
        if "stage_kernels" in decoder:
            values["stage_kernels"] = tuple(tuple(int(v) for v in kernel) for kernel in decoder["stage_kernels"])
        if "upsamples" in decoder:
            values["upsamples"] = tuple((tuple(int(v) for v in stride), int(reduction))
                                        for stride, reduction in decoder["upsamples"])
        if "stage5_kernel" in decoder:
            values["stage5_kernel"] = tuple(int(v) for v in decoder["stage5_kernel"])
        if decoder.get("stage5_channels") is not None:
            values["stage5_channels"] = int(decoder["stage5_channels"])
        config = cls(
            latent_channels=int(get("in_channels", section.get("latent_channels", 128))),
            out_channels=int(get("out_channels", 3)), patch_size=int(get("patch_size", 4)),
            head_dim=int(get("head_dim", get("na_head_dim", 64))), t_emb_dim=int(get("t_emb_dim", 384)),
            steps=int(get("default_num_inference_steps", 2)),
            timestep_scale_multiplier=float(get("timestep_scale_multiplier", 1.0)),
            model_output_type=str(section.get("model_output_type", "v")), **values)
        config.validate()
        return config

    def validate(self) -> None:
        problems = []
        stages = len(self.stage_channels)
        if not len(self.stage_depths) == len(self.stage_kernels) == stages == len(self.upsamples) + 1 == 5:
            problems.append(f"stage_channels/stage_depths/stage_kernels need 5 entries and upsamples 4; got "
                            f"{stages}/{len(self.stage_depths)}/{len(self.stage_kernels)}/{len(self.upsamples)}")
        widths = [c // reduction for c, (_, reduction) in zip(self.stage_channels, self.upsamples)]
        if widths != list(self.stage_channels[1:]):
            problems.append(f"stage_channels {list(self.stage_channels)} do not follow the upsamples' channel "
                            f"reductions (expected {[self.stage_channels[0], *widths]})")
        if any(c % self.head_dim for c in (*self.stage_channels, self.diffusion_channels)):
            problems.append(f"every stage width must be a multiple of head_dim={self.head_dim}")
        if any(k % 2 == 0 for kernel in (*self.stage_kernels, self.stage5_kernel) for k in kernel):
            problems.append("neighborhood kernels must be odd")
        if self.model_output_type not in ("v", "x0") or self.steps < 1:
            problems.append(f"model_output_type={self.model_output_type!r} (supported: 'v', 'x0'), "
                            f"default_num_inference_steps={self.steps} (≥ 1)")
        if self.time_scale != 8 or self.space_scale != 32:
            problems.append(f"the upsamples compose to ×{self.time_scale} in time and ×{self.space_scale} in space "
                            "(LTX latents: ×8 / ×32)")
        if problems:
            raise ConfigError("unsupported diffusion video decoder config: " + "; ".join(problems)
                              + ". Use the `vae` section of an official LTX-2.5 VAE file.")

    @property
    def diffusion_channels(self) -> int:
        return self.stage5_channels if self.stage5_channels is not None else self.stage_channels[-1]

    @property
    def time_scale(self) -> int:
        scale = 1
        for stride, _ in self.upsamples:
            scale *= stride[0]
        return scale

    @property
    def space_scale(self) -> int:
        scale = self.patch_size
        for stride, _ in self.upsamples:
            scale *= stride[1]
        return scale

    def latent_floor(self) -> Kernel:
        """Smallest latent (F', H', W') every stage's attention can run on; smaller latents are edge-padded."""
        floor, cumulative = [1, 1, 1], (1, 1, 1)
        for kernel, (stride, _) in zip(self.stage_kernels, self.upsamples):
            floor = [max(f, -(-k // s)) for f, k, s in zip(floor, kernel, cumulative)]
            cumulative = tuple(c * s for c, s in zip(cumulative, stride))
        return tuple(max(f, -(-k // s)) for f, k, s in zip(floor, self.stage5_kernel, cumulative))
