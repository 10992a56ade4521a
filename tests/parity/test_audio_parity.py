"""Audio VAE decoder, HiFi-GAN and BigVGAN+BWE vocoders against the reference ltx_core: same weights, fp32."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from support.audio25 import random_audio_state
from support.configs import TINY_AUDIO_VAE, TINY_VOCODERS
from support.reference import import_ltx_core

from ltx2_core.loader.audio_weights import load_audio_decoder, load_vocoder
from ltx2_core.model.audio_vae import AudioDecoder, AudioDecoderConfig, VocoderConfig, build_vocoder, decode_audio
from ltx2_core.model.audio_vae.bigvgan import SincResampler
from ltx2_core.stages import empty_latent

# fp32 on CPU with the same operations in the same order; only convolution kernels may sum in another order
TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}

# the released decoder layout (2 res blocks per level) at a width where ch = z_channels × mel_bins / 4 stays small
SMALL_AUDIO_VAE = {
    "model": {"params": {"ddconfig": {
        **TINY_AUDIO_VAE["model"]["params"]["ddconfig"], "ch": 32, "z_channels": 2, "num_res_blocks": 2},
        "sampling_rate": 16000}},
    "preprocessing": {"stft": {"hop_length": 160, "causal": True}},
}


pytestmark = pytest.mark.usefixtures("one_thread")


def _reference_decoder(section: dict) -> torch.nn.Module:
    import_ltx_core()
    from ltx_core.model.audio_vae import AudioDecoderConfigurator

    return AudioDecoderConfigurator.from_config({"audio_vae": section}).eval()


def _reference_vocoder(section: dict) -> torch.nn.Module:
    import_ltx_core()
    from ltx_core.model.audio_vae import VocoderConfigurator

    return VocoderConfigurator.from_config({"vocoder": section}).eval()


def _same_weights(ours: torch.nn.Module, reference: torch.nn.Module, seed: int, gain: float) -> None:
    state = random_audio_state(reference, seed, gain)
    reference.load_state_dict(state, strict=True)
    ours.load_state_dict(state, strict=True)


@pytest.mark.parametrize("frames", [1, 5])
def test_decoder_matches_reference(frames):
    ours = AudioDecoder(AudioDecoderConfig.from_metadata(SMALL_AUDIO_VAE)).eval()
    reference = _reference_decoder(SMALL_AUDIO_VAE)
    _same_weights(ours, reference, seed=1, gain=1.0)
    latent = torch.randn(2, 2, frames, 16, generator=torch.Generator().manual_seed(2))
    expected = reference(latent)
    actual = ours(latent)
    assert actual.shape == (2, 2, 4 * frames - 3, 64)
    assert expected.std() > 0.1  # the comparison is not between two near-constant tensors
    torch.testing.assert_close(actual, expected, **TOLERANCE)


def _mel(batch: int, frames: int, seed: int) -> torch.Tensor:
    """Standard-normal "log-mel" (a real one's offset of about -4 would let conv_pre's response to it dominate)."""
    return torch.randn(batch, 2, frames, 64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("version", "seed", "gain", "frames", "samples_per_frame"), [
    ("2.0", 3, 1.2, 5, 240),  # HiFi-GAN, 24 kHz
    ("2.3", 5, 0.7, 3, 160 * 3),  # BigVGAN-v2 at 16 kHz + bandwidth extension ×3 to 48 kHz
])
def test_vocoder_matches_reference(version, seed, gain, frames, samples_per_frame):
    ours = build_vocoder(VocoderConfig.from_metadata(TINY_VOCODERS[version])).eval()
    reference = _reference_vocoder(TINY_VOCODERS[version])
    _same_weights(ours, reference, seed=seed, gain=gain)
    mel = _mel(2, frames, seed=seed + 1)
    expected = reference(mel)
    actual = ours(mel)
    assert actual.shape == (2, 2, frames * samples_per_frame)
    # neither silent nor saturated by the final tanh / clamped flat
    assert 0.02 < expected.abs().mean() < 0.5 and (expected.abs() < 1).float().mean() > 0.95
    torch.testing.assert_close(actual, expected, **TOLERANCE)


def test_constructed_filters_equal_reference():
    """The anti-alias filters (persistent) and the resampler filter (recomputed) equal the reference's own."""
    ours = build_vocoder(VocoderConfig.from_metadata(TINY_VOCODERS["2.3"]))
    reference = _reference_vocoder(TINY_VOCODERS["2.3"])
    expected = dict(reference.named_buffers())
    filters = {name: buffer for name, buffer in ours.named_buffers() if name.endswith("filter")}
    assert "resampler.filter" in filters and "resampler.filter" not in ours.state_dict()
    # both sides compute the filters (sinc, Kaiser / Hann windows) with their own float ops: fp32 rounding apart
    for name, buffer in filters.items():
        torch.testing.assert_close(buffer, expected[name], atol=1e-7, rtol=1e-6, msg=name)
    with torch.device("meta"):
        resampler = SincResampler(3)
    resampler.reset_buffers("cpu")
    torch.testing.assert_close(resampler.filter, reference.resampler.filter, atol=1e-7, rtol=1e-6)


def _reference_from_file(path, configurator_name: str, sd_ops_name: str) -> torch.nn.Module:
    """Built by the reference's configurator from the file's metadata, filled through its own key filter."""
    import_ltx_core()
    from ltx_core.loader.sft_loader import SafetensorsModelStateDictLoader
    from ltx_core.model.audio_vae import model_configurator

    loader = SafetensorsModelStateDictLoader()
    model = getattr(model_configurator, configurator_name).from_config(loader.metadata(str(path)))
    state = loader.load(str(path), sd_ops=getattr(model_configurator, sd_ops_name), device=torch.device("cpu"))
    # like the reference's builder, ignore file tensors the model does not use (the unused latent statistics)
    assert not model.load_state_dict(state.sd, strict=False).missing_keys
    return model.eval()


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_loaded_from_checkpoint_matches_reference(tiny_checkpoints, version):
    path = tiny_checkpoints[version]
    decoder, vocoder = load_audio_decoder(path), load_vocoder(path)
    ref_decoder = _reference_from_file(path, "AudioDecoderConfigurator", "AUDIO_VAE_DECODER_COMFY_KEYS_FILTER")
    ref_vocoder = _reference_from_file(path, "VocoderConfigurator", "VOCODER_COMFY_KEYS_FILTER")
    for ours, reference in ((decoder, ref_decoder), (vocoder, ref_vocoder)):
        expected = reference.state_dict()
        assert set(ours.state_dict()) == set(expected)
        for name, tensor in ours.state_dict().items():
            assert torch.equal(tensor, expected[name]), name  # both loaded copies of the file's tensors
    with safe_open(str(path), framework="pt") as f:  # a copy of the file's tensor
        assert torch.equal(decoder.get_buffer("per_channel_statistics.std-of-means"),
                           f.get_tensor("audio_vae.per_channel_statistics.std-of-means"))

    latent = torch.randn(1, 8, 3, 16, generator=torch.Generator().manual_seed(7))
    mel = ref_decoder(latent)
    torch.testing.assert_close(decoder(latent), mel, **TOLERANCE)
    waveform, rate = decode_audio(latent, decoder, vocoder)
    expected = ref_vocoder(mel)
    assert rate == ref_vocoder.output_sampling_rate == {"2.0": 24000, "2.3": 48000}[version]
    assert waveform.dtype == torch.float32 and waveform.shape == expected.shape
    torch.testing.assert_close(waveform, expected, **TOLERANCE)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_audio_of_a_clip_has_the_reference_length(tiny_checkpoints, version):
    """F frames at fps: round(F / fps · 25) latents, 4·T − 3 mel frames (the causal decoder's first latent frame is
    one mel frame), hop samples each: as long as the reference's audio, which is about 30 ms shorter than the video
    (25 frames at 24 fps: 1.042 s of video, 1.010 s of audio; see README)."""
    import_ltx_core()
    from ltx_core.types import AudioLatentShape, VideoPixelShape

    path = tiny_checkpoints[version]
    decoder, vocoder = load_audio_decoder(path), load_vocoder(path)
    ref_decoder = _reference_from_file(path, "AudioDecoderConfigurator", "AUDIO_VAE_DECODER_COMFY_KEYS_FILTER")
    ref_vocoder = _reference_from_file(path, "VocoderConfigurator", "VOCODER_COMFY_KEYS_FILTER")
    for frames, fps in ((25, 24.0), (17, 25.0), (97, 30.0), (121, 24.0), (241, 23.976)):
        reference = AudioLatentShape.from_video_pixel_shape(VideoPixelShape(1, frames, 64, 64, fps)).frames
        assert empty_latent(64, 64, frames, fps).audio.shape[2] == reference
    latent = empty_latent(64, 64, 25, 24.0).audio.normal_(generator=torch.Generator().manual_seed(0))
    waveform, rate = decode_audio(latent, decoder, vocoder)
    assert waveform.shape[-1] == ref_vocoder(ref_decoder(latent)).shape[-1] == (4 * 26 - 3) * rate // 100
    assert waveform.shape[-1] / rate == pytest.approx(1.01)  # 100 mel frames per second; the video: 1.042 s
