"""Configuration of the audio VAE decoder and the vocoders (spec §4), read from the checkpoint's metadata.

`audio_vae` section: `model.params.ddconfig` (the decoder's shape), `model.params.sampling_rate` and
`preprocessing.stft.hop_length` (the mel frame rate). `vocoder` section: a flat HiFi-GAN dict (LTX-2.0) or
`{"vocoder": {...}, "bwe": {...}}` (LTX-2.3: BigVGAN-v2 at 16 kHz plus bandwidth extension to 48 kHz).

Defaults are the reference configurator's, so a section that omits a key means what it means there. Everything
the released models do not use (attention, GroupNorm, non-causal convolutions, other residual blocks) is rejected;
every problem of a section is reported in one ConfigError naming the key and the supported values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx2_core.errors import ConfigError
from ltx2_core.geometry import AUDIO_HOP, AUDIO_SAMPLE_RATE

MEL_BINS = 64  # the vocoders' first convolution takes stereo × 64 mel bins (2 × 64 = 128 channels)
STEREO = 2
LATENT_UPSAMPLE = 4  # mel frames and mel bins per latent cell: two ×2 upsampling levels
_GENERATOR_DEFAULTS = {"resblock_kernel_sizes": [3, 7, 11], "resblock_dilation_sizes": [[1, 3, 5]] * 3,
                      "upsample_rates": [6, 5, 2, 2, 2], "upsample_kernel_sizes": [16, 15, 8, 4, 4],
                      "upsample_initial_channel": 1024}


_PATHS = {"sampling_rate": "model.params.sampling_rate", "hop_length": "preprocessing.stft.hop_length"}


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _object(section: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`section[key]` when it is a JSON object, else an empty one (so the defaults apply)."""
    value = section.get(key)
    return value if isinstance(value, Mapping) else {}


def _int_list(value: Any, length: int | None = None) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) > 0 and all(_positive_int(v) for v in value)
            and (length is None or len(value) == length))


@dataclass(frozen=True)
class AudioDecoderConfig:
    """The audio VAE decoder: latent (B, latent_channels, T, mel_bins/4) -> log-mel (B, 2, 4T-3, mel_bins)."""

    base_channels: int = 128  # ddconfig `ch`: channels of the last (finest) level
    channel_multipliers: tuple[int, ...] = (1, 2, 4)  # per level, finest first
    res_blocks: int = 2  # ddconfig `num_res_blocks`; the decoder runs one more per level
    latent_channels: int = 8  # ddconfig `z_channels`
    mel_bins: int = 64
    sample_rate: int = AUDIO_SAMPLE_RATE  # of the waveform the mel spectrogram describes
    hop_length: int = AUDIO_HOP  # waveform samples per mel frame

    @property
    def latent_mel_bins(self) -> int:
        return self.mel_bins // LATENT_UPSAMPLE

    @property
    def latent_features(self) -> int:
        """Width of the patchified latent (c·f), which the per-channel statistics normalise."""
        return self.latent_channels * self.latent_mel_bins

    @property
    def latents_per_second(self) -> float:
        return self.sample_rate / self.hop_length / LATENT_UPSAMPLE

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any]) -> AudioDecoderConfig:
        """Builds the config from the checkpoint's `audio_vae` section."""
        if not isinstance(section, Mapping):
            raise ConfigError(f"the 'audio_vae' config section must be a JSON object, found {type(section).__name__}")
        params = _object(_object(section, "model"), "params")
        ddconfig = params.get("ddconfig")
        if not isinstance(ddconfig, Mapping):
            raise ConfigError("the 'audio_vae' config section has no model.params.ddconfig object; use an official "
                              "LTX-2 checkpoint (its metadata describes the audio VAE there)")
        preprocessing = _object(section, "preprocessing")
        mel_bins = (ddconfig.get("mel_bins") or _object(preprocessing, "mel").get("n_mel_channels")
                    or _object(section, "variables").get("mel_bins"))
        values = {
            "ch": ddconfig.get("ch", 128), "ch_mult": ddconfig.get("ch_mult", [1, 2, 4]),
            "num_res_blocks": ddconfig.get("num_res_blocks", 2), "z_channels": ddconfig.get("z_channels", 8),
            "out_ch": ddconfig.get("out_ch", 2), "resolution": ddconfig.get("resolution", 256), "mel_bins": mel_bins,
            "sampling_rate": params.get("sampling_rate", AUDIO_SAMPLE_RATE),
            "hop_length": _object(preprocessing, "stft").get("hop_length", AUDIO_HOP),
        }
        problems = _decoder_problems(ddconfig, values)
        if problems:
            raise ConfigError("unsupported audio_vae config: " + "; ".join(problems))
        return cls(base_channels=values["ch"], channel_multipliers=tuple(values["ch_mult"]),
                   res_blocks=values["num_res_blocks"], latent_channels=values["z_channels"], mel_bins=mel_bins,
                   sample_rate=values["sampling_rate"], hop_length=values["hop_length"])


def _decoder_problems(ddconfig: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    problems = [f"{_PATHS.get(key, 'ddconfig.' + key)}={values[key]!r} (must be a positive integer)"
                for key in ("ch", "num_res_blocks", "z_channels", "resolution", "sampling_rate", "hop_length")
                if not _positive_int(values[key])]
    for key, supported in (("norm_type", "pixel"), ("causality_axis", "height"), ("out_ch", STEREO)):
        value = ddconfig.get(key, supported)
        if value != supported:
            problems.append(f"ddconfig.{key}={value!r} (supported: {supported!r})")
    if not _int_list(values["ch_mult"], length=3):
        problems.append(f"ddconfig.ch_mult={values['ch_mult']!r} (supported: three positive integers, i.e. a ×4 "
                        "latent, e.g. [1, 2, 4])")
    mel_bins = values["mel_bins"]
    if not _positive_int(mel_bins) or mel_bins % LATENT_UPSAMPLE:
        problems.append(f"mel_bins={mel_bins!r} (ddconfig.mel_bins or preprocessing.mel.n_mel_channels: a positive "
                        f"multiple of {LATENT_UPSAMPLE}, 64 in the released models)")
    elif _positive_int(values["ch"]) and _positive_int(values["z_channels"]):
        # the reference sizes the statistics by `ch`, yet applies them to the z_channels × mel_bins/4 features
        features = values["z_channels"] * mel_bins // LATENT_UPSAMPLE
        if values["ch"] != features:
            problems.append(f"ddconfig.ch={values['ch']} must equal z_channels × mel_bins/4 = {features} (the "
                            "per-channel statistics have `ch` entries and normalise the patchified latent)")
    # attention is on by default in the reference; the released decoders switch it off
    if ddconfig.get("mid_block_add_attention", True) is not False:
        problems.append(f"ddconfig.mid_block_add_attention={ddconfig.get('mid_block_add_attention', True)!r} "
                        "(supported: False; the released decoders have no attention)")
    attn_resolutions = ddconfig.get("attn_resolutions", [8, 16, 32])
    if not isinstance(attn_resolutions, (list, tuple)) or _uses_attention(attn_resolutions, values):
        problems.append(f"ddconfig.attn_resolutions={attn_resolutions!r} selects attention levels for "
                        f"resolution={values['resolution']!r} (supported: no attention, e.g. [])")
    return problems


def _uses_attention(attn_resolutions: list[Any] | tuple[Any, ...], values: Mapping[str, Any]) -> bool:
    """The reference adds attention at the levels whose resolution (coarsest: resolution / 2**(levels-1)) is listed."""
    if not _positive_int(values["resolution"]) or not _int_list(values["ch_mult"]):
        return False
    levels = len(values["ch_mult"])
    coarsest = values["resolution"] // 2 ** (levels - 1)
    return any(coarsest * 2**level in attn_resolutions for level in range(levels))


@dataclass(frozen=True)
class GeneratorConfig:
    """One mel -> waveform generator: (B, 2, T, 64) -> (B, 2, T · samples_per_frame)."""

    amp: bool  # False: HiFi-GAN (`resblock "1"`); True: BigVGAN-v2 AMP1 blocks with anti-aliased SnakeBeta
    initial_channels: int
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilations: tuple[tuple[int, int, int], ...]
    sample_rate: int  # of the waveform it produces
    final_activation: str | None  # "tanh", "clamp" or None (the BWE generator's residual is not bounded)
    final_bias: bool

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsample_rates)

    def channels(self, stage: int) -> int:
        """Channels after upsampling stage `stage` (0-based); they halve at every stage."""
        return self.initial_channels // 2 ** (stage + 1)


def _generator_problems(section: Mapping[str, Any], where: str, *, amp: bool) -> list[str]:
    """Problems of one generator dict, its keys prefixed by `where` (e.g. "bwe.") in the messages."""
    checks = {"resblock": "AMP1" if amp else "1", "stereo": True, **({"activation": "snakebeta"} if amp else {})}
    problems = [f"{where}{key}={section.get(key)!r} (supported: {supported!r})"
                for key, supported in checks.items() if section.get(key) != supported]
    problems += [f"{where}{key}={section[key]!r} (must be true or false)"
                 for key in ("use_tanh_at_final", "use_bias_at_final") if not isinstance(section.get(key, True), bool)]
    values = {key: section.get(key, default) for key, default in _GENERATOR_DEFAULTS.items()}
    rates, kernels = values["upsample_rates"], values["upsample_kernel_sizes"]
    if not _int_list(rates) or not _int_list(kernels) or len(rates) != len(kernels):
        problems.append(f"{where}upsample_rates={rates!r} / upsample_kernel_sizes={kernels!r} (must be positive "
                        "integer lists of equal length)")
    elif any(k < s or (k - s) % 2 for s, k in zip(rates, kernels)):
        problems.append(f"{where}upsample_kernel_sizes={kernels!r} (each kernel minus its rate must be even and "
                        ">= 0, so that every stage multiplies the length exactly by its rate)")
    elif not _positive_int(values["upsample_initial_channel"]) or values["upsample_initial_channel"] % 2**len(rates):
        problems.append(f"{where}upsample_initial_channel={values['upsample_initial_channel']!r} (must be a positive "
                        f"multiple of 2**{len(rates)}: the channels halve at every upsampling stage)")
    kernels, dilations = values["resblock_kernel_sizes"], values["resblock_dilation_sizes"]
    if (not _int_list(kernels) or any(k % 2 == 0 for k in kernels) or not isinstance(dilations, (list, tuple))
            or len(dilations) != len(kernels) or not all(_int_list(d, length=3) for d in dilations)):
        problems.append(f"{where}resblock_kernel_sizes={kernels!r} / resblock_dilation_sizes={dilations!r} "
                        "(supported: odd kernels, each with a list of three dilations)")
    return problems


def _generator(section: Mapping[str, Any], *, amp: bool, sample_rate: int, final_activation: bool) -> GeneratorConfig:
    """A generator dict that passed `_generator_problems`, as a GeneratorConfig."""
    values = {key: section.get(key, default) for key, default in _GENERATOR_DEFAULTS.items()}
    tanh = section.get("use_tanh_at_final", True)
    return GeneratorConfig(
        amp=amp, initial_channels=values["upsample_initial_channel"], upsample_rates=tuple(values["upsample_rates"]),
        upsample_kernel_sizes=tuple(values["upsample_kernel_sizes"]),
        resblock_kernel_sizes=tuple(values["resblock_kernel_sizes"]),
        resblock_dilations=tuple(tuple(d) for d in values["resblock_dilation_sizes"]), sample_rate=sample_rate,
        final_activation=("tanh" if tanh else "clamp") if final_activation else None,
        final_bias=section.get("use_bias_at_final", True),
    )


@dataclass(frozen=True)
class BandwidthExtensionConfig:
    """LTX-2.3's BWE: causal log-mel of the 16 kHz waveform -> residual, added to a ×`ratio` sinc resampling."""

    generator: GeneratorConfig
    input_rate: int
    output_rate: int
    hop_length: int  # of the causal STFT, in input samples
    n_fft: int  # also the window length

    @property
    def ratio(self) -> int:
        return self.output_rate // self.input_rate


@dataclass(frozen=True)
class VocoderConfig:
    """HiFi-GAN alone (LTX-2.0) or BigVGAN-v2 followed by bandwidth extension (LTX-2.3)."""

    generator: GeneratorConfig
    bwe: BandwidthExtensionConfig | None = None

    @property
    def sample_rate(self) -> int:
        """Rate of the final waveform: 24000 for the LTX-2.0 HiFi-GAN, 48000 with LTX-2.3's bandwidth extension."""
        return self.bwe.output_rate if self.bwe is not None else self.generator.sample_rate

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any]) -> VocoderConfig:
        """Builds the config from the checkpoint's `vocoder` section (flat HiFi-GAN, or `vocoder` + `bwe`)."""
        if not isinstance(section, Mapping):
            raise ConfigError(f"the 'vocoder' config section must be a JSON object, found {type(section).__name__}")
        if "bwe" in section:
            return _bwe_vocoder(section)
        problems = _generator_problems(section, "", amp=False)
        rate = section.get("output_sampling_rate", 24000)
        if not _positive_int(rate):
            problems.append(f"output_sampling_rate={rate!r} (must be a positive integer)")
        if problems:
            raise ConfigError("unsupported vocoder config (LTX-2.0 HiFi-GAN layout; LTX-2.3 nests 'vocoder' and "
                              "'bwe'): " + "; ".join(problems))
        return cls(_generator(section, amp=False, sample_rate=rate, final_activation=True))


def _bwe_vocoder(section: Mapping[str, Any]) -> VocoderConfig:
    inner, bwe = section.get("vocoder"), section["bwe"]
    if not isinstance(inner, Mapping) or not isinstance(bwe, Mapping):
        raise ConfigError("unsupported vocoder config: with 'bwe' the section must hold two objects, 'vocoder' and "
                          "'bwe' (the LTX-2.3 layout)")
    problems = _generator_problems(inner, "vocoder.", amp=True) + _generator_problems(bwe, "bwe.", amp=True)
    rates = {key: bwe.get(key) for key in ("input_sampling_rate", "output_sampling_rate", "hop_length", "n_fft")}
    problems += [f"bwe.{key}={value!r} (must be a positive integer)" for key, value in rates.items()
                 if not _positive_int(value)]
    if bwe.get("num_mels") != MEL_BINS:
        problems.append(f"bwe.num_mels={bwe.get('num_mels')!r} (supported: {MEL_BINS})")
    if bwe.get("win_size", rates["n_fft"]) != rates["n_fft"]:
        problems.append(f"bwe.win_size={bwe.get('win_size')!r} (supported: equal to n_fft={rates['n_fft']!r})")
    if not problems:
        # the reference ignores bwe.apply_final_activation: the residual generator never has one
        vocoder = _generator(inner, amp=True, sample_rate=rates["input_sampling_rate"], final_activation=True)
        extension = BandwidthExtensionConfig(
            _generator(bwe, amp=True, sample_rate=rates["output_sampling_rate"], final_activation=False),
            rates["input_sampling_rate"], rates["output_sampling_rate"], rates["hop_length"], rates["n_fft"])
        problems = _bwe_problems(vocoder, extension)
    if problems:
        raise ConfigError("unsupported vocoder config (LTX-2.3 'vocoder' + 'bwe' layout): " + "; ".join(problems))
    return VocoderConfig(vocoder, extension)


def _bwe_problems(vocoder: GeneratorConfig, bwe: BandwidthExtensionConfig) -> list[str]:
    """Lengths must line up without padding or cropping, as they do in the released model."""
    problems = []
    if bwe.output_rate % bwe.input_rate:
        problems.append(f"bwe.output_sampling_rate={bwe.output_rate} (must be a multiple of input_sampling_rate="
                        f"{bwe.input_rate})")
    elif bwe.generator.samples_per_frame != bwe.hop_length * bwe.ratio:
        problems.append(f"bwe.upsample_rates={list(bwe.generator.upsample_rates)} (their product must be hop_length "
                        f"× output/input rate = {bwe.hop_length * bwe.ratio}, the residual's samples per mel frame)")
    if vocoder.samples_per_frame % bwe.hop_length:
        problems.append(f"vocoder.upsample_rates={list(vocoder.upsample_rates)} (their product must be a multiple of "
                        f"bwe.hop_length={bwe.hop_length}, so the waveform splits into whole STFT frames)")
    if bwe.n_fft < bwe.hop_length:
        problems.append(f"bwe.n_fft={bwe.n_fft} (must be at least hop_length={bwe.hop_length})")
    return problems
