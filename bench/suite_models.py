"""The models and inputs of the GPU suite: one set of random weights, shared by ours, the reference `ltx_core`
LTXModel and diffusers' LTX2VideoTransformer3DModel (assigned, not copied, so three sides cost one model's memory).

Full mode: the released structure (every width and head count of LTX-2.0 / 2.3 / 2.5) with a slice of its 48 blocks;
quick mode: the tiny test structure, for a CPU smoke run.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.geometry import audio_latent_length, audio_positions, video_positions
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.types import StreamInput, TextEmbeddings
from support.configs import RELEASED_2_0, RELEASED_2_3, RELEASED_2_5

RELEASED = {"2.0": (RELEASED_2_0, "2.0.0"), "2.3": (RELEASED_2_3, "2.3.0"), "2.5": (RELEASED_2_5, "2.5.0")}
# the structures the suite's references build: ltx_core 1.0.0 and diffusers 0.42 predate LTX-2.5 (its bias-free
# feed-forwards, prompt AdaLN off), which its rows time alone (its parity is ltx-core 1.2.0's, tests/parity)
REFERENCE_VERSIONS = ("2.0", "2.3")


def suite_config(version: str, layers: int, quick: bool) -> TransformerConfig:
    """The released structure cut to `layers` blocks, or the tiny one in quick mode."""
    if quick:
        return TransformerConfig.tiny(version, num_layers=layers)
    section, model_version = RELEASED[version]
    return TransformerConfig.from_metadata({**section, "num_layers": layers}, model_version)


@torch.no_grad()
def random_transformer(config: TransformerConfig, device: torch.device, dtype: torch.dtype,
                       seed: int = 0) -> LTX2Transformer:
    """Our DiT with random weights made on `device` in `dtype` (no host copy of a 37 GB model): matrices
    N(0, 1/fan-in), so activations keep their scale through 48 blocks; norm weights 1; the rest N(0, 0.02²)."""
    with torch.device("meta"):
        model = LTX2Transformer(config)
    model.to(dtype).to_empty(device=device)  # allocated once, in `dtype`
    generator = torch.Generator(device).manual_seed(seed)
    for name, param in model.named_parameters():
        if param.dim() >= 2 and "scale_shift_table" not in name:
            param.normal_(0.0, param.shape[-1] ** -0.5, generator=generator)
        elif "norm" in name:
            param.fill_(1.0)
        else:
            param.normal_(0.0, 0.02, generator=generator)
    return model.eval()


def reference_of(model: LTX2Transformer) -> torch.nn.Module:
    """ltx_core's LTXModel holding `model`'s weight tensors."""
    from support.reference import reference_transformer  # here: it needs pytest and ltx_core, which a ComfyUI lacks

    return reference_transformer(dict(model.state_dict()), model.config.to_metadata())


class Clip(NamedTuple):
    """One pass's inputs at a clip size, in our layouts and the reference's."""

    video: torch.Tensor  # (1, video tokens, 128)
    audio: torch.Tensor  # (1, audio tokens, 128)
    text: TextEmbeddings  # before the caption projection
    negative: TextEmbeddings
    video_positions: torch.Tensor
    audio_positions: torch.Tensor
    sigma: float

    @property
    def tokens(self) -> tuple[int, int, int]:
        return self.video.shape[1], self.audio.shape[1], self.text.video.shape[1]

    def streams(self, batch: int = 1) -> tuple[StreamInput, StreamInput]:
        sigma = self.video.new_full((batch,), self.sigma, dtype=torch.float32)
        return (StreamInput(self.video.expand(batch, -1, -1), sigma, sigma[:, None]),
                StreamInput(self.audio.expand(batch, -1, -1), sigma, sigma[:, None]))

    def reference_modalities(self):
        from ltx_core.model.transformer import Modality

        sigma = self.video.new_full((1,), self.sigma, dtype=torch.float32)
        tv, ta, _ = self.tokens
        return (Modality(self.video, sigma, sigma.new_full((1, tv, 1), self.sigma), self.video_positions,
                         self.text.video),
                Modality(self.audio, sigma, sigma.new_full((1, ta, 1), self.sigma), self.audio_positions,
                         self.text.audio))


def clip(config: TransformerConfig, size: tuple[int, int, int], text_tokens: int, device: torch.device,
         dtype: torch.dtype, seed: int = 1) -> Clip:
    """Random latents and prompts for a clip of (frames, height, width) pixels at 24 fps."""
    frames, height, width = size
    f, rows, cols = (frames - 1) // 8 + 1, height // 32, width // 32
    audio_tokens = audio_latent_length(frames, 24.0)
    generator = torch.Generator(device).manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=generator, device=device, dtype=dtype)

    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)
    prompts = [TextEmbeddings(*(randn(1, text_tokens, w) for w in widths)) for _ in range(2)]
    return Clip(randn(1, f * rows * cols, config.video.in_channels), randn(1, audio_tokens, config.audio.in_channels),
                prompts[0], prompts[1], video_positions(f, rows, cols, 24.0, device=device),
                audio_positions(audio_tokens, device=device), 0.7)
