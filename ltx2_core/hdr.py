"""HDR output of the HDR IC-LoRA (ltx-core 1.2.0's `hdr.py`): the working-space curves, the LoRA's HDR settings
and an sRGB preview of linear light.

The HDR IC-LoRA makes the VAE decode a log-encoded picture: the decoder's [0, 1] output is a working-space code
of a transfer curve, ARRI LogC3 (EI 800; the default) or ACEScct (AMPAS S-2016-001). `Transfer.to_linear` turns it
into scene-linear Rec.709 light in [0, ∞): the curve's inverse, then (ACEScct, whose primaries are ACEScg / AP1)
the AP1 -> Rec.709 matrix, then a clamp at 0. Frames here are channel-last, (..., 3).

The LoRA file says which curve in its safetensors metadata: `hdr_transform` ("logc3", "acescct", or "true": LogC3)
or only `use_hdr_transform` (LogC3), with the control video's `reference_downscale_factor` (default 1).
"""

from __future__ import annotations

import enum
import os
from typing import Mapping, NamedTuple

import torch

# ARRI LogC3 (EI 800): a linear toe below CUT, a log10 curve above it
LOGC3_A, LOGC3_B, LOGC3_C, LOGC3_D = 5.555556, 0.052272, 0.247190, 0.385537
LOGC3_E, LOGC3_F, LOGC3_CUT = 5.367655, 0.092809, 0.010591
# ACEScct: a linear toe below X_BREAK (code Y_BREAK), log2 above it
ACESCCT_A, ACESCCT_B = 10.5402377416545, 0.0729055341958355
ACESCCT_X_BREAK, ACESCCT_Y_BREAK = 0.0078125, 0.155251141552511
ACESCCT_LOG_M, ACESCCT_LOG_B = 17.52, 9.72

# linear ACEScg (AP1, D60) -> linear Rec.709 / sRGB primaries (D65): rows are the output channels
ACESCG_TO_REC709 = ((1.70505, -0.62179, -0.08326), (-0.13026, 1.14080, -0.01055), (-0.02400, -0.12897, 1.15297))
# EXR `chromaticities` of Rec.709 (R, G, B, white: x, y each)
REC709_CHROMATICITIES = (0.64, 0.33, 0.30, 0.60, 0.15, 0.06, 0.3127, 0.3290)

HDR_KEY, HDR_FLAG_KEY, DOWNSCALE_KEY = "hdr_transform", "use_hdr_transform", "reference_downscale_factor"


def logc3_to_linear(code: torch.Tensor) -> torch.Tensor:
    """LogC3 codes (clamped to [0, 1]) -> linear light."""
    code = code.clamp(0.0, 1.0)
    log_side = (torch.pow(10.0, (code - LOGC3_D) / LOGC3_C) - LOGC3_B) / LOGC3_A
    return torch.where(code >= LOGC3_E * LOGC3_CUT + LOGC3_F, log_side, (code - LOGC3_F) / LOGC3_E)


def linear_to_logc3(linear: torch.Tensor) -> torch.Tensor:
    """Linear light (clamped at 0) -> LogC3 codes in [0, 1]."""
    x = linear.clamp(min=0.0)
    code = torch.where(x >= LOGC3_CUT, LOGC3_C * torch.log10(LOGC3_A * x + LOGC3_B) + LOGC3_D, LOGC3_E * x + LOGC3_F)
    return code.clamp(0.0, 1.0)


def acescct_to_linear(code: torch.Tensor) -> torch.Tensor:
    """ACEScct codes (clamped to [0, 1]) -> linear ACEScg light."""
    code = code.clamp(0.0, 1.0)
    log_side = torch.pow(2.0, code * ACESCCT_LOG_M - ACESCCT_LOG_B)
    return torch.where(code > ACESCCT_Y_BREAK, log_side, (code - ACESCCT_B) / ACESCCT_A)


def linear_to_acescct(linear: torch.Tensor) -> torch.Tensor:
    """Linear ACEScg light (clamped at 0) -> ACEScct codes in [0, 1]."""
    x = linear.clamp(min=0.0)
    log_side = (torch.log2(x.clamp(min=1e-12)) + ACESCCT_LOG_B) / ACESCCT_LOG_M
    return torch.where(x > ACESCCT_X_BREAK, log_side, ACESCCT_A * x + ACESCCT_B).clamp(0.0, 1.0)


def acescg_to_rec709(linear: torch.Tensor) -> torch.Tensor:
    """Linear ACEScg (..., 3) -> linear Rec.709 (..., 3), in fp32."""
    matrix = torch.tensor(ACESCG_TO_REC709, dtype=torch.float32, device=linear.device)
    return torch.einsum("...c,dc->...d", linear.float(), matrix)


class Transfer(enum.Enum):
    """The working-space curve the VAE's output is coded in."""

    LOGC3 = "logc3"
    ACESCCT = "acescct"

    @property
    def display_name(self) -> str:
        return {"logc3": "LogC3", "acescct": "ACEScct"}[self.value]

    def to_linear(self, code: torch.Tensor) -> torch.Tensor:
        """Working-space codes (..., 3), channel-last -> scene-linear Rec.709 light ≥ 0, fp32."""
        code = code.float()
        if self is Transfer.LOGC3:
            return logc3_to_linear(code).clamp(min=0.0)
        return acescg_to_rec709(acescct_to_linear(code)).clamp(min=0.0)


class HDR(NamedTuple):
    """An SDR video (a file or `video_io.VideoFrames`) to make HDR (`Request.hdr`): `strength` of its guiding
    tokens (1: kept clean), `high_quality` (2N − 1 frames generated, every other kept: smoother, about twice the
    time)."""

    video: object
    strength: float = 1.0
    high_quality: bool = False

    @property
    def name(self) -> str:
        from ltx2_core.video_io import video_name

        return video_name(self.video)


class HdrConfig(NamedTuple):
    """An HDR IC-LoRA's settings: its curve and the control video's downscale factor."""

    transfer: Transfer = Transfer.LOGC3
    downscale: int = 1


def hdr_config(metadata: Mapping[str, str], name: str = "the LoRA") -> HdrConfig | None:
    """The HDR settings a LoRA's safetensors metadata states; None when it states none (not an HDR IC-LoRA).
    ValueError naming the fix for an unknown curve or a downscale factor that is not an integer ≥ 1."""
    raw = metadata.get(HDR_KEY, "")
    if not raw and not metadata.get(HDR_FLAG_KEY):
        return None
    try:
        transfer = Transfer.LOGC3 if not raw or raw == "true" else Transfer(raw)
    except ValueError:
        raise ValueError(f"{name} states {HDR_KEY}={raw!r} in its metadata; known curves: logc3, acescct (or "
                         "'true' for LogC3): fix the file's metadata or use the HDR IC-LoRA as released") from None
    text = metadata.get(DOWNSCALE_KEY, "1")
    try:
        downscale = int(text)
    except ValueError:
        downscale = 0
    if downscale < 1:
        raise ValueError(f"{name} states {DOWNSCALE_KEY}={text!r} in its metadata; it must be an integer ≥ 1: fix "
                         "the file's metadata or use the HDR IC-LoRA as released")
    return HdrConfig(transfer, downscale)


def hdr_lora_config(path: str | os.PathLike) -> HdrConfig:
    """The HDR settings of the LoRA file at `path` (headers only); ValueError naming the fix when it has none."""
    from ltx2_core.loader.safetensors_file import read_header

    config = hdr_config(read_header(path, "HDR IC-LoRA").metadata, f"LoRA {os.fspath(path)}")
    if config is None:
        raise ValueError(f"LoRA {os.fspath(path)} is not an HDR IC-LoRA: its metadata has no {HDR_KEY} (nor "
                         f"{HDR_FLAG_KEY}); load the HDR IC-LoRA file, whose metadata states its curve")
    return config


def srgb_preview(linear: torch.Tensor) -> torch.Tensor:
    """Scene-linear light -> display sRGB in [0, 1] at exposure 0 (clamp to [0, 1], then the sRGB OETF of
    IEC 61966-2-1), fp32: what the reference's preview video shows."""
    x = linear.float().clamp(0.0, 1.0)
    return torch.where(x <= 0.0031308, x * 12.92, 1.055 * x.pow(1.0 / 2.4) - 0.055)
