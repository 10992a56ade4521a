"""The per-step preview: a linear latent→RGB map fitted from the VAE decoder, and previews queued per step that are
shown once ready, newest first, without waiting."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from nodes import NODE_CLASS_MAPPINGS as NODES
from nodes import bridge
from nodes import sampling as sampling_nodes
from ltx2_core.preview import LatentPreview, rgb_projection


class LinearDecoder(nn.Module):
    """Decodes each latent cell to a flat 32×32 block of tanh(W·latent + b): the case a linear fit recovers."""

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace(latent_channels=128)
        self.colour = nn.Conv3d(128, 3, 1)
        with torch.no_grad():
            self.colour.weight.mul_(0.2)

    def forward(self, latent: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        rgb = torch.tanh(self.colour(latent) * 0.1)  # small arguments: tanh is nearly linear there
        return rgb.repeat_interleave(32, dim=3).repeat_interleave(32, dim=4)


def test_the_fitted_projection_recovers_a_linear_decoder():
    decoder = LinearDecoder()
    weight, bias = rgb_projection(decoder)
    assert weight.shape == (128, 3) and bias.shape == (3,)
    expected = decoder.colour.weight.reshape(3, 128).T * 0.1 / 2  # [-1, 1] -> [0, 1] halves the slope
    torch.testing.assert_close(weight, expected, atol=2e-3, rtol=0.05)
    torch.testing.assert_close(bias, decoder.colour.bias * 0.1 / 2 + 0.5, atol=2e-3, rtol=0.05)
    assert rgb_projection(decoder)[0] is weight  # fitted once per decoder


def test_previews_are_queued_per_step_and_shown_newest_first():
    preview = LatentPreview(rgb_projection(LinearDecoder()), frames=3, rows=2, cols=4)
    assert preview.ready() is None
    tokens = [torch.randn(1, 3 * 2 * 4, 128) for _ in range(2)]
    for step in tokens:
        preview.observe(step, torch.zeros(1, 5, 128))
    image = preview.ready()
    assert image.shape == (2, 4, 3) and image.dtype.name == "uint8"
    middle = tokens[1][0, 8:16] @ preview.weight + preview.bias  # the middle latent frame of the newest step
    expected = middle.clamp(0, 1).mul(255).to(torch.uint8).reshape(2, 4, 3).numpy()
    assert abs(image.astype(int) - expected.astype(int)).max() <= 1
    assert preview.ready() is None  # the older one was dropped


def test_the_sampler_node_feeds_a_preview_to_every_step_inside_comfyui(monkeypatch, loaded):
    model, _, conditioning, guidance = loaded
    shown = []
    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "interrupt_requested", lambda: False)  # ComfyUI's flag, never set here
    monkeypatch.setattr(bridge, "progress_bar", lambda total, node_id, preview: lambda done, steps: shown.append(
        (done, steps, preview())))
    (latent,) = sampling_nodes.LTX2EmptyLatent().make(96, 64, 9, 24.0)
    sampling_nodes.LTX2Sampler().sample(model, conditioning, latent, 0, 3, "ltx2", guidance=guidance, unique_id="6")
    assert [(done, steps) for done, steps, _ in shown] == [(1, 3), (2, 3), (3, 3)]
    assert all(image.shape == (2, 3, 3) for _, _, image in shown)  # on the CPU every copy is ready at once


def test_the_generate_node_feeds_a_preview_to_every_step_of_every_stage_inside_comfyui(monkeypatch, loaded, files):
    model, encoder, _, _ = loaded
    shown = []
    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "interrupt_requested", lambda: False)  # ComfyUI's flag, never set here
    monkeypatch.setattr(bridge, "model_path", lambda folder, name, marker=None: name)  # the files are paths here
    monkeypatch.setattr(bridge, "progress_bar", lambda total, node_id, preview: lambda done, steps: shown.append(
        (done, steps, preview and preview())))
    (upsampler,) = NODES["LTX2UpsamplerLoader"]().load(files["upsampler"], model)
    NODES["LTX2Generate"]().generate(model, encoder, "a cat", "blurry", "two-stage", 128, 64, 9, 24.0, 3, 2,
                                     upsampler=upsampler, distilled_lora=files["distilled"], unique_id="4")
    assert [(done, steps) for done, steps, _ in shown] == [(1, 2), (2, 2), (1, 3), (2, 3), (3, 3)]
    sizes = [None if image is None else image.shape for _, _, image in shown]
    assert sizes == [(1, 2, 3)] * 2 + [(2, 4, 3)] * 3  # half size first, then the refined full size


def test_the_long_video_node_previews_every_step_of_every_window_at_its_size(monkeypatch, loaded):
    """The last window is shorter (fewer tokens): its previews still show the full-size picture, not a half-size
    reading of its tokens."""
    model, encoder, _, _ = loaded
    shown = []
    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "interrupt_requested", lambda: False)  # ComfyUI's flag, never set here
    monkeypatch.setattr(bridge, "progress_bar", lambda total, node_id, preview: lambda done, steps: shown.append(
        (done, steps, preview and preview())))
    NODES["LTX2GenerateLong"]().generate(model, encoder, "a cat", "blurry", "one-stage", 64, 64, 2.0, 24.0, 25, 8,
                                         3, 2, unique_id="9")  # 49 frames: windows of 25, 25 and 17 frames
    assert len(shown) == 3 * 2 and all(image is not None and image.shape == (2, 2, 3) for _, _, image in shown)
