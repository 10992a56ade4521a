"""LTX2ImageCondition takes any ComfyUI IMAGE a node may produce: grayscale (1 channel), grayscale with alpha and RGBA
become RGB when queued; other shapes are refused there, before any model work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ltx2_core.conditioning.images import prepare_image
from support.node_calls import node


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_every_channel_count_becomes_an_rgb_condition(channels):
    gray = torch.linspace(0, 1, 2 * 48 * 64).reshape(2, 48, 64, 1)
    alpha = torch.full_like(gray, 0.5)
    image = torch.cat({1: [gray], 2: [gray, alpha], 3: [gray] * 3, 4: [gray] * 3 + [alpha]}[channels], dim=-1)
    (conditions,) = node("LTX2ImageCondition", image, 0, 1.0, 33)
    pixels = conditions[0].image
    want = (gray[0].expand(-1, -1, 3).numpy() * 255).round().astype(np.uint8)
    assert pixels.shape == (48, 64, 3) and np.array_equal(pixels, want)
    conditions[0].check(9)
    assert prepare_image(conditions[0], 64, 96).shape == (1, 3, 1, 64, 96)  # the H.264 round trip takes it


@pytest.mark.parametrize("shape", [(48, 64, 3), (1, 48, 64, 5), (1, 2, 48, 64, 3)])
def test_other_shapes_are_refused_when_queued(shape):
    with pytest.raises(ValueError, match=r"ComfyUI IMAGE \(batch, height, width, channels\) with 1 to 4 channels"):
        node("LTX2ImageCondition", torch.zeros(shape), 0, 1.0, 33)
