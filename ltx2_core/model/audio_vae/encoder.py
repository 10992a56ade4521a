"""The audio VAE encoder (spec §4): stereo log-mel (B, 2, T, 64) -> normalised latent (B, 8, ceil(T/4), 16).

The mirror of the decoder, causal in time (the "height" axis) like it: conv_in -> per level (finest first)
`res_blocks` resnets, then (except at the coarsest level) a stride-2 causal convolution -> mid (2 resnets) ->
PixelNorm, SiLU, conv_out (2·z channels: mean and log-variance; only the mean is kept) -> per-channel normalisation
of the patchified latent. Parameter names are the checkpoint's (`audio_vae.encoder.` stripped). `encode_audio` adds
the reference's front end (mel.py): waveform at any rate -> the latent the reference's `encode_audio` gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.errors import ConfigError
from ltx2_core.model.audio_vae.config import STEREO, AudioDecoderConfig
from ltx2_core.model.audio_vae.decoder import CausalConv2d, MidBlock, ResnetBlock, pixel_norm
from ltx2_core.model.audio_vae.mel import MelSettings, waveform_to_mel
from ltx2_core.model.statistics import PerChannelStatistics

DEFAULT_N_FFT = 1024  # the reference configurator's default for preprocessing.stft.filter_length


@dataclass(frozen=True)
class AudioEncoderConfig:
    """The decoder's shape (the same ddconfig) plus the mel front end's STFT size."""

    shape: AudioDecoderConfig
    n_fft: int = DEFAULT_N_FFT

    @property
    def mel(self) -> MelSettings:
        return MelSettings(self.shape.sample_rate, self.n_fft, self.shape.hop_length, self.shape.mel_bins)

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any]) -> AudioEncoderConfig:
        """From the checkpoint's `audio_vae` section: what the decoder reads, plus `preprocessing.stft.filter_length`
        and the encoder-only `ddconfig.in_channels` / `double_z` (checked: stereo in, mean and variance out)."""
        shape = AudioDecoderConfig.from_metadata(section)
        ddconfig = section["model"]["params"]["ddconfig"]
        preprocessing = section.get("preprocessing")
        stft = preprocessing.get("stft") if isinstance(preprocessing, Mapping) else None
        n_fft = stft.get("filter_length", DEFAULT_N_FFT) if isinstance(stft, Mapping) else DEFAULT_N_FFT
        problems = [f"ddconfig.{key}={ddconfig.get(key, value)!r} (supported: {value!r})"
                    for key, value in (("in_channels", STEREO), ("double_z", True))
                    if ddconfig.get(key, value) != value]
        if not isinstance(n_fft, int) or isinstance(n_fft, bool) or n_fft < 2:
            problems.append(f"preprocessing.stft.filter_length={n_fft!r} (must be an integer >= 2)")
        if problems:
            raise ConfigError("unsupported audio_vae config for the encoder: " + "; ".join(problems))
        return cls(shape, n_fft)


class Downsample(nn.Module):
    """Stride-2 convolution, causal in time: (B, C, T, F) -> (B, C, (T+1)//2, F//2) (padding: 2 frames before,
    one bin after)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 2, 0)))


class DownLevel(nn.Module):
    """One resolution level: `blocks` resnets, then (except at the coarsest level) a ×2 downsample."""

    def __init__(self, in_channels: int, out_channels: int, blocks: int, downsample: bool) -> None:
        super().__init__()
        widths = [in_channels] + [out_channels] * blocks
        self.block = nn.ModuleList(ResnetBlock(i, o) for i, o in zip(widths[:-1], widths[1:]))
        self.downsample = Downsample(out_channels) if downsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.block:
            x = block(x)
        return self.downsample(x) if self.downsample is not None else x


class AudioEncoder(nn.Module):
    """Stereo log-mel (B, 2, T, 64) -> normalised latent (B, 8, ceil(T/4), 16) (T halved, rounding up, twice)."""

    def __init__(self, config: AudioEncoderConfig) -> None:
        super().__init__()
        self.config = config
        shape = config.shape
        self.per_channel_statistics = PerChannelStatistics(shape.latent_features)
        widths = [shape.base_channels * m for m in shape.channel_multipliers]
        inputs = [shape.base_channels] + widths[:-1]
        self.conv_in = CausalConv2d(STEREO, shape.base_channels, 3)
        self.down = nn.ModuleList(DownLevel(inputs[level], widths[level], shape.res_blocks,
                                            downsample=level < len(widths) - 1) for level in range(len(widths)))
        self.mid = MidBlock(widths[-1])
        self.conv_out = CausalConv2d(widths[-1], 2 * shape.latent_channels, 3)

    def check_mel(self, mel: torch.Tensor) -> None:
        """ValueError naming the expected (B, 2, T, mel_bins) layout unless `mel` has it."""
        bins = self.config.shape.mel_bins
        if mel.dim() != 4 or mel.shape[1] != STEREO or mel.shape[3] != bins or mel.numel() == 0:
            raise ValueError(f"audio encoder input must be a stereo log-mel spectrogram of shape (B, {STEREO}, T, "
                             f"{bins}) with B, T >= 1 (mel.waveform_to_mel's output), got {tuple(mel.shape)}")

    def normalize(self, latent: torch.Tensor) -> torch.Tensor:
        """Into the diffusion space, per (channel, mel bin) feature of the patchified latent (as the decoder)."""
        b, c, t, f = latent.shape
        tokens = latent.permute(0, 2, 1, 3).reshape(b, t, c * f)
        tokens = self.per_channel_statistics.normalize(tokens, dim=-1)
        return tokens.reshape(b, t, c, f).permute(0, 2, 1, 3)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (B, 2, T, 64) -> normalised latent mean (B, 8, ceil(T/4), 16)."""
        self.check_mel(mel)
        x = self.conv_in(mel)
        for level in self.down:
            x = level(x)
        x = self.conv_out(F.silu(pixel_norm(self.mid(x))))
        return self.normalize(x[:, :self.config.shape.latent_channels])


def stereo_waveform(waveform: torch.Tensor) -> torch.Tensor:
    """(B, C, S) or (C, S) with C in {1, 2} -> (B, 2, S); mono is copied to both sides. Refuses, naming the fix,
    more than two channels, an empty waveform and non-finite samples (checked here, before any model work)."""
    if waveform.dim() == 2:
        waveform = waveform[None]
    if waveform.dim() != 3 or waveform.shape[1] not in (1, STEREO):
        raise ValueError(f"audio waveform must have shape (B, C, samples) or (C, samples) with C = 1 (mono) or 2 "
                         f"(stereo), got {tuple(waveform.shape)}; downmix other layouts to stereo first")
    if waveform.shape[0] == 0 or waveform.shape[2] == 0:
        raise ValueError(f"audio waveform is empty (shape {tuple(waveform.shape)}); give at least one sample")
    if not waveform.is_floating_point():
        raise ValueError(f"audio waveform must be floating point in [-1, 1], got {waveform.dtype}")
    if not bool(torch.isfinite(waveform).all()):
        raise ValueError("audio waveform has NaN or infinite samples; repair or re-export the audio")
    return waveform.expand(-1, STEREO, -1) if waveform.shape[1] == 1 else waveform


def encode_audio(waveform: torch.Tensor, sample_rate: int, encoder: AudioEncoder) -> torch.Tensor:
    """waveform (B, C, S) or (C, S) at `sample_rate`, C = 1 or 2 -> normalised audio latent (B, 8, ceil(T/4), 16),
    T = S' // hop + 1 mel frames of the S' = ceil(S · model rate / sample_rate) resampled samples.

    As the reference's `encode_audio`: resampled to the model's rate and turned into a log-mel in the waveform's
    float dtype, then encoded in the encoder's dtype, on its device."""
    if not isinstance(sample_rate, int) or isinstance(sample_rate, bool) or sample_rate <= 0:
        raise ValueError(f"sample_rate must be a positive integer (Hz), got {sample_rate!r}")
    parameter = next(encoder.parameters())
    stereo = stereo_waveform(waveform).to(parameter.device)
    mel = waveform_to_mel(stereo, sample_rate, encoder.config.mel)
    return encoder(mel.to(parameter.dtype))
