"""Waveform -> log-mel spectrogram, the audio VAE encoder's front end, in torch (spec §4).

The reference (ltx-core 1.2.0 `AudioProcessor`) uses torchaudio, which does not install beside our torch; this is
the same computation written out:
* resampling to the model's rate with torchaudio's default `functional.resample`: a Hann-windowed sinc polyphase
  filter (6 zero crossings, roll-off 0.99) over the rates divided by their gcd, the input zero-padded by the
  filter width, the output cut to ceil(length · new / orig) samples; nothing when the rates are equal;
* |STFT| (power 1) with a periodic Hann window of n_fft samples, hop `hop_length`, centred with reflect padding;
* slaney-scale, slaney-normalised triangular mel filters from 0 Hz to the Nyquist frequency;
* log of the magnitudes clamped at 1e-5.
Channels are kept as they are (the reference has no mono or downmix step; its encoder takes stereo).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

LOG_FLOOR = 1e-5
_LOWPASS_ZEROS = 6  # torchaudio's lowpass_filter_width
_ROLLOFF = 0.99
_SLANEY_LINEAR_STEP = 200.0 / 3  # Hz per mel below 1 kHz
_SLANEY_KNEE_HZ = 1000.0
_SLANEY_LOG_STEP = math.log(6.4) / 27.0


class MelSettings(NamedTuple):
    """The front end of one audio VAE: its waveform rate, STFT size and hop, mel bins."""

    sample_rate: int
    n_fft: int
    hop_length: int
    mel_bins: int


def _sinc_kernel(orig: int, new: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, int]:
    """Polyphase kernels (new, 1, 2·width + orig) and the width, for rates already divided by their gcd."""
    base = min(orig, new) * _ROLLOFF
    width = math.ceil(_LOWPASS_ZEROS * orig / base)
    taps = torch.arange(-width, width + orig, dtype=dtype, device=device)[None, None] / orig
    t = torch.arange(0, -new, -1, dtype=dtype, device=device)[:, None, None] / new + taps
    t = (t * base).clamp(-_LOWPASS_ZEROS, _LOWPASS_ZEROS)
    window = torch.cos(t * math.pi / _LOWPASS_ZEROS / 2) ** 2
    t = t * math.pi
    # sin(t)/t with its limit 1 at t = 0; computed in the waveform's dtype as the reference does
    sinc = torch.where(t == 0, torch.ones((), dtype=dtype, device=device), t.sin() / t)
    return sinc * (window * (base / orig)), width


def resample(waveform: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """(..., S) at `orig_rate` -> (..., ceil(S · new / orig)) at `new_rate` (torchaudio's default sinc resampler)."""
    if orig_rate == new_rate:
        return waveform
    gcd = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // gcd, new_rate // gcd
    kernel, width = _sinc_kernel(orig, new, waveform.dtype, waveform.device)
    shape = waveform.shape
    flat = F.pad(waveform.reshape(-1, 1, shape[-1]), (width, width + orig))
    out = F.conv1d(flat, kernel, stride=orig)  # (N, new, frames): phase p of frame j is output sample j·new + p
    out = out.transpose(1, 2).reshape(flat.shape[0], -1)
    return out[:, :math.ceil(new * shape[-1] / orig)].reshape(*shape[:-1], -1)


def _mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    """Slaney's mel scale, inverted: linear below 1 kHz, logarithmic above."""
    knee = _SLANEY_KNEE_HZ / _SLANEY_LINEAR_STEP
    log_part = _SLANEY_KNEE_HZ * torch.exp(_SLANEY_LOG_STEP * (mel - knee))
    return torch.where(mel >= knee, log_part, mel * _SLANEY_LINEAR_STEP)


def mel_filters(settings: MelSettings) -> torch.Tensor:
    """(n_fft/2 + 1, mel_bins) slaney-normalised triangles from 0 Hz to sample_rate/2 (float32)."""
    n_freqs = settings.n_fft // 2 + 1
    freqs = torch.linspace(0, settings.sample_rate // 2, n_freqs)
    nyquist = settings.sample_rate / 2.0
    # the top edge in double precision, as the reference computes it (Python floats)
    mel_max = (_SLANEY_KNEE_HZ / _SLANEY_LINEAR_STEP + math.log(nyquist / _SLANEY_KNEE_HZ) / _SLANEY_LOG_STEP
               if nyquist >= _SLANEY_KNEE_HZ else nyquist / _SLANEY_LINEAR_STEP)
    edges = _mel_to_hz(torch.linspace(0.0, mel_max, settings.mel_bins + 2))
    gaps = edges[1:] - edges[:-1]
    slopes = edges[None] - freqs[:, None]  # (n_freqs, mel_bins + 2)
    rising = -slopes[:, :-2] / gaps[:-1]
    falling = slopes[:, 2:] / gaps[1:]
    triangles = torch.clamp(torch.minimum(rising, falling), min=0)
    return triangles * (2.0 / (edges[2:] - edges[:-2]))[None]  # equal area per filter


def log_mel(waveform: torch.Tensor, settings: MelSettings) -> torch.Tensor:
    """waveform (B, C, S) at settings.sample_rate -> log-mel (B, C, frames = S // hop + 1, mel_bins), float32."""
    b, c, s = waveform.shape
    window = torch.hann_window(settings.n_fft, dtype=waveform.dtype, device=waveform.device)
    spectrum = torch.stft(waveform.reshape(b * c, s), settings.n_fft, settings.hop_length, settings.n_fft, window,
                          center=True, pad_mode="reflect", return_complex=True).abs()  # (B·C, freqs, frames)
    filters = mel_filters(settings).to(device=waveform.device, dtype=spectrum.dtype)
    mel = torch.matmul(spectrum.transpose(1, 2), filters)  # (B·C, frames, mel_bins)
    return torch.log(mel.clamp(min=LOG_FLOOR)).reshape(b, c, -1, settings.mel_bins).to(waveform.dtype)


def waveform_to_mel(waveform: torch.Tensor, sample_rate: int, settings: MelSettings) -> torch.Tensor:
    """(B, C, S) at `sample_rate` -> log-mel (B, C, frames, mel_bins) of the waveform resampled to the model's rate."""
    return log_mel(resample(waveform, sample_rate, settings.sample_rate), settings)
