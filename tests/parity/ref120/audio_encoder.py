"""1.2.0 side of tests/parity/test_audio_encoder_parity.py: for each tiny audio VAE file the test wrote, builds the
audio encoder through the reference's own builder and key filter, and returns, for each waveform, the log-mel of its
`AudioProcessor` (torchaudio resampling and mel spectrogram) and the latent of its `encode_audio`."""

import torch
from exchange import inputs, outputs

from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.audio_vae import AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER, encode_audio
from ltx_core.model.audio_vae.model_configurator import AudioEncoderConfigurator
from ltx_core.model.audio_vae.ops import AudioProcessor
from ltx_core.types import Audio

tensors, settings = inputs()
cpu = torch.device("cpu")
results = {}
for name, path in settings["files"].items():
    builder = SingleGPUModelBuilder(AudioEncoderConfigurator, path, AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER)
    encoder = builder.build(device=cpu, dtype=torch.float32).eval()
    processor = AudioProcessor(encoder.sample_rate, encoder.mel_bins, encoder.mel_hop_length, encoder.n_fft)
    for case, rate in settings["cases"].items():
        audio = Audio(waveform=tensors[case], sampling_rate=rate)
        results[f"{name}.{case}.mel"] = processor.waveform_to_mel(audio)
        results[f"{name}.{case}.latent"] = encode_audio(audio, encoder)
outputs(results)
