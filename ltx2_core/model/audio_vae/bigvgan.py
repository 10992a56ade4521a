"""LTX-2.3's vocoder: BigVGAN-v2 at 16 kHz followed by bandwidth extension to 48 kHz (spec §4).

BigVGAN-v2 (NVIDIA) replaces HiFi-GAN's leaky-ReLUs with SnakeBeta, x + sin²(αx)/β, evaluated at twice the sample
rate between Kaiser-sinc low-pass filters so that its harmonics do not alias ("AMP" blocks). The 12-tap filters are
buffers of the checkpoint (`*.upsample.filter`, `*.downsample.lowpass.filter`) and load from it.

Bandwidth extension (BWE): the 16 kHz waveform's causal log-mel spectrogram (STFT and mel bases from the checkpoint,
`mel_stft.*`) drives a second BigVGAN that predicts the 48 kHz residual, added to a Hann-windowed-sinc ×3 resampling
of the 16 kHz waveform. That resampling filter is a constant and not in the file (recomputed, `reset_buffers`).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.model.audio_vae.config import MEL_BINS, GeneratorConfig, VocoderConfig
from ltx2_core.model.audio_vae.layers import Generator, dilated_conv_pairs

ANTI_ALIAS_RATIO = 2  # SnakeBeta runs at twice the sample rate
ANTI_ALIAS_TAPS = 12
SNAKE_EPS = 1e-9
MEL_FLOOR = 1e-5  # log-mel clamp, as in the training front-end
SINC_ROLLOFF = 0.99  # Hann-sinc resampler parameters (torchaudio.functional.resample's defaults)
SINC_ZERO_CROSSINGS = 6


def kaiser_sinc_filter(cutoff: float, half_width: float) -> torch.Tensor:
    """12-tap Kaiser-windowed sinc low-pass (cutoff, transition half-width in cycles/sample), unit DC gain: (1, 1, 12).

    Computed on the CPU in float32, like the reference, whatever the default device and dtype.
    """
    taps = ANTI_ALIAS_TAPS
    half = taps // 2
    attenuation = 2.285 * (half - 1) * math.pi * 4 * half_width + 7.95  # dB, Kaiser's estimate
    beta = 0.1102 * (attenuation - 8.7)  # Kaiser's rule for above 50 dB, where both 12-tap filters are
    window = torch.kaiser_window(taps, periodic=False, beta=beta, device="cpu", dtype=torch.float32)
    time = torch.arange(-half, half, device="cpu", dtype=torch.float32) + 0.5  # even length: taps between samples, never at 0
    x = 2 * cutoff * time
    lowpass = 2 * cutoff * window * (torch.sin(math.pi * x) / math.pi / x)
    return (lowpass / lowpass.sum()).view(1, 1, taps)


@functools.cache
def _anti_alias_taps() -> torch.Tensor:
    """Made once, in float32 and as a real tensor even inside a fake-tensor mode (the memory checks build the
    vocoder there, some under a bf16 default dtype; a cached fake or bf16 filter would reach every later build)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return kaiser_sinc_filter(cutoff=0.5 / ANTI_ALIAS_RATIO, half_width=0.6 / ANTI_ALIAS_RATIO)


def _anti_alias_filter() -> torch.Tensor:
    """A fresh copy on the default device in the default dtype, as the module's other tensors (a build on `meta`
    makes ~400 of these, then loads them from the file)."""
    return _anti_alias_taps().to(torch.get_default_device(), torch.get_default_dtype(), copy=True)


class UpSample1d(nn.Module):
    """×2 band-limited upsampling, replicate-padded: (B, C, L) -> (B, C, 2L)."""

    pad = ANTI_ALIAS_TAPS // ANTI_ALIAS_RATIO - 1
    trim = pad * ANTI_ALIAS_RATIO + (ANTI_ALIAS_TAPS - ANTI_ALIAS_RATIO) // 2

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("filter", _anti_alias_filter())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        weight = self.filter.to(x.dtype).expand(channels, -1, -1)
        # ×ratio restores the amplitude lost to the inserted zeros
        x = ANTI_ALIAS_RATIO * F.conv_transpose1d(x, weight, stride=ANTI_ALIAS_RATIO, groups=channels)
        return x[..., self.trim:-self.trim]


class LowPassFilter1d(nn.Module):
    """Low-pass then keep every second sample, replicate-padded: (B, C, 2L) -> (B, C, L)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("filter", _anti_alias_filter())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (ANTI_ALIAS_TAPS // 2 - 1, ANTI_ALIAS_TAPS // 2), mode="replicate")
        weight = self.filter.to(x.dtype).expand(channels, -1, -1)
        return F.conv1d(x, weight, stride=ANTI_ALIAS_RATIO, groups=channels)


class DownSample1d(nn.Module):
    """(B, C, 2L) -> (B, C, L); a wrapper only so the filter's name matches the file (`downsample.lowpass`)."""

    def __init__(self) -> None:
        super().__init__()
        self.lowpass = LowPassFilter1d()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lowpass(x)


class SnakeBeta(nn.Module):
    """x + sin²(αx)/β per channel, α and β stored as logarithms: (B, C, L) -> same."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = torch.exp(self.alpha)[None, :, None]
        beta = torch.exp(self.beta)[None, :, None]
        return x + (1.0 / (beta + SNAKE_EPS)) * torch.sin(x * alpha).pow(2)


class Activation1d(nn.Module):
    """Anti-aliased SnakeBeta: upsample ×2, activate, low-pass and decimate: (B, C, L) -> same."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.act = SnakeBeta(channels)
        self.upsample = UpSample1d()
        self.downsample = DownSample1d()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(self.act(self.upsample(x)))


class AMPBlock1(nn.Module):
    """Three residual steps x += conv2(act2(conv1(act1(x)))) with conv1 dilated 1, 3, 5: (B, C, L) -> same."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, int, int]) -> None:
        super().__init__()
        self.convs1, self.convs2 = dilated_conv_pairs(channels, kernel_size, dilations)
        self.acts1 = nn.ModuleList(Activation1d(channels) for _ in dilations)
        self.acts2 = nn.ModuleList(Activation1d(channels) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv1, conv2, act1, act2 in zip(self.convs1, self.convs2, self.acts1, self.acts2):
            x = x + conv2(act2(conv1(act1(x))))
        return x


class BigVGAN(Generator):
    """BigVGAN-v2 generator: (B, 2, T, 64) -> (B, 2, T · samples_per_frame), clamped to [-1, 1] or (BWE) raw."""

    def __init__(self, config: GeneratorConfig) -> None:
        if not config.amp:
            raise ValueError("BigVGAN takes an AMP1 generator config; `resblock \"1\"` configs build a HiFiGAN")
        super().__init__(config, AMPBlock1, Activation1d(config.channels(len(config.upsample_rates) - 1)))


class STFTBases(nn.Module):
    """The checkpoint's windowed DFT bases (`mel_stft.stft_fn.*`): rows 0..n_fft/2 real, then imaginary parts."""

    def __init__(self, n_fft: int) -> None:
        super().__init__()
        rows = 2 * (n_fft // 2 + 1)
        self.register_buffer("forward_basis", torch.zeros(rows, 1, n_fft))
        self.register_buffer("inverse_basis", torch.zeros(rows, 1, n_fft))  # unused; only to match the file


class CausalMelSTFT(nn.Module):
    """Causal log-mel spectrogram with the checkpoint's bases: waveforms (N, L) -> (N, 64, L / hop_length).

    The file stores the bases the BWE generator was trained with (bf16 in the release), so they are loaded rather than
    recomputed; left-only padding makes frame t depend on samples up to t·hop only.
    """

    def __init__(self, n_fft: int, hop_length: int, mel_bins: int = MEL_BINS) -> None:
        super().__init__()
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.stft_fn = STFTBases(n_fft)
        self.register_buffer("mel_basis", torch.zeros(mel_bins, n_fft // 2 + 1))

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        x = F.pad(waveform.unsqueeze(1), (self.n_fft - self.hop_length, 0))
        spectrum = F.conv1d(x, self.stft_fn.forward_basis.to(x.dtype), stride=self.hop_length)
        real, imag = spectrum.chunk(2, dim=1)  # (N, n_fft/2+1, frames) each
        magnitude = torch.sqrt(real**2 + imag**2)
        mel = torch.matmul(self.mel_basis.to(magnitude.dtype), magnitude)
        return torch.log(torch.clamp(mel, min=MEL_FLOOR))


def hann_sinc_filter(ratio: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Hann-windowed sinc interpolation filter for ×ratio upsampling (torchaudio's resample kernel): (1, 1, K)."""
    width = math.ceil(SINC_ZERO_CROSSINGS / SINC_ROLLOFF)
    time = (torch.arange(2 * width * ratio + 1, device=device) / ratio - width) * SINC_ROLLOFF
    window = torch.cos(time.clamp(-SINC_ZERO_CROSSINGS, SINC_ZERO_CROSSINGS) * math.pi / SINC_ZERO_CROSSINGS / 2) ** 2
    return (torch.sinc(time) * window * SINC_ROLLOFF / ratio).view(1, 1, -1)


class SincResampler(nn.Module):
    """Integer-ratio band-limited upsampling, replicate-padded: (B, C, L) -> (B, C, ratio · L)."""

    def __init__(self, ratio: int) -> None:
        super().__init__()
        self.ratio = ratio
        self.width = math.ceil(SINC_ZERO_CROSSINGS / SINC_ROLLOFF)
        self.register_buffer("filter", hann_sinc_filter(ratio), persistent=False)

    def reset_buffers(self, device: torch.device | str) -> None:
        """Recomputes the filter (not in the checkpoint) on the CPU, as the reference does, and moves it."""
        self.filter = hann_sinc_filter(self.ratio, device="cpu").to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (self.width, self.width), mode="replicate")
        weight = self.filter.to(x.dtype).expand(channels, -1, -1)
        x = self.ratio * F.conv_transpose1d(x, weight, stride=self.ratio, groups=channels)
        # drop what the padding produced: 2·width·ratio samples in front, (taps - ratio) behind
        return x[..., 2 * self.width * self.ratio:-(self.filter.shape[-1] - self.ratio)]


class VocoderWithBWE(nn.Module):
    """Stereo log-mel (B, 2, T, 64) -> 48 kHz waveform (B, 2, T · 160 · 3) in [-1, 1] (released sizes)."""

    def __init__(self, config: VocoderConfig) -> None:
        super().__init__()
        if config.bwe is None:
            raise ValueError("VocoderWithBWE needs a vocoder config with a 'bwe' part (LTX-2.3)")
        self.config = config
        self.vocoder = BigVGAN(config.generator)
        self.bwe_generator = BigVGAN(config.bwe.generator)
        self.mel_stft = CausalMelSTFT(config.bwe.n_fft, config.bwe.hop_length)
        self.resampler = SincResampler(config.bwe.ratio)

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        low = self.vocoder(mel)  # (B, 2, L) at the input rate; L is a whole number of STFT hops (config check)
        b, c, length = low.shape
        log_mel = self.mel_stft(low.reshape(b * c, length))  # (B·2, 64, L / hop)
        residual = self.bwe_generator.generate(log_mel.reshape(b, c * MEL_BINS, -1))
        return torch.clamp(residual + self.resampler(low), -1, 1)
