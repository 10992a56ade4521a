"""Keyframes as the reference's keyframe interpolation holds them (`ltx2_core.conditioning.keyframes`): always
appended (frame 0 too, the latent's own tokens untouched), a frame-0 keyframe spanning [0, 1) / fps in both
releases' rules and any other frame [f, f + span) / fps, several at one frame all kept; the kind plugs in through its
registry line, and `encode_images` makes keyframes where asked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import (
    CONDITIONS,
    EncodedImage,
    EncodedKeyframe,
    ImageCondition,
    condition_kind,
    condition_video,
    encode_images,
)
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import patchify_video, video_positions
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings

FPS = 24.0
GRID = (3, 2, 3)  # latent frames, rows, cols of a 17-frame 96x64 clip


def _stream(conditions, span):
    clean = torch.randn(1, 18, 128, generator=torch.Generator().manual_seed(1))
    return clean, condition_video(clean, video_positions(*GRID, FPS), conditions, FPS, span)


@pytest.mark.parametrize("span", [8, 1])  # 1.0.0's rule (LTX-2.0, 2.3), 1.2.0's (LTX-2.5)
def test_a_frame_zero_keyframe_is_appended_over_the_first_pixel_frame(span):
    image = torch.randn(1, 128, 1, 2, 3)
    clean, stream = _stream([EncodedKeyframe(image, 0, 0.8)], span)
    assert stream.tokens == 18 and stream.clean.shape[1] == 18 + 6
    assert torch.equal(stream.clean[:, :18], clean)  # copies: the latent's own tokens are not held
    assert torch.equal(stream.clean[:, 18:], patchify_video(image))
    torch.testing.assert_close(stream.mask[:, :18], torch.ones(1, 18, 1), atol=0, rtol=0)
    torch.testing.assert_close(stream.mask[:, 18:], torch.full((1, 6, 1), 0.2), atol=1e-7, rtol=0)
    time = stream.positions[0, 0, 18:]
    torch.testing.assert_close(time, torch.tensor([0.0, 1 / FPS]).expand(6, 2), atol=1e-7, rtol=0)
    torch.testing.assert_close(stream.positions[0, 1:, 18:], stream.positions[0, 1:, :6], atol=0, rtol=0)  # space
    held = condition_video(clean, video_positions(*GRID, FPS), [EncodedImage(image, 0, 0.8)], FPS, span)
    assert held.clean.shape[1] == 18  # the image-to-video kind replaces frame 0 instead


@pytest.mark.parametrize("span", [8, 1])
def test_a_keyframe_at_another_frame_spans_the_releases_frames(span):
    _, stream = _stream([EncodedKeyframe(torch.randn(1, 128, 1, 2, 3), 8, 1.0)], span)
    torch.testing.assert_close(stream.positions[0, 0, 18:], torch.tensor([8 / FPS, (8 + span) / FPS]).expand(6, 2),
                               atol=1e-7, rtol=0)
    torch.testing.assert_close(stream.mask[:, 18:], torch.zeros(1, 6, 1), atol=0, rtol=0)


def test_several_keyframes_at_one_frame_are_all_appended_in_order():
    first, second = torch.randn(1, 128, 1, 2, 3), torch.randn(1, 128, 1, 2, 3)
    _, stream = _stream([EncodedKeyframe(first, 0, 1.0), EncodedKeyframe(second, 0, 0.5)], 1)
    assert stream.clean.shape[1] == 18 + 12 and stream.attention is None  # full attention, as the reference
    assert torch.equal(stream.clean[:, 18:24], patchify_video(first))
    assert torch.equal(stream.clean[:, 24:], patchify_video(second))


def test_the_kind_is_registered_and_runs_in_the_sampler():
    assert CONDITIONS["keyframe"] is EncodedKeyframe
    assert condition_kind(EncodedKeyframe(torch.zeros(1, 128, 1, 2, 3), 0, 1.0)) == "keyframe"
    model = demo_transformer(TransformerConfig.tiny("2.0"))
    config = model.config
    g = torch.Generator().manual_seed(0)
    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)
    text = TextEmbeddings(*(torch.randn(1, 7, w, generator=g) for w in widths))
    image = torch.randn(1, 128, 1, 2, 3)

    def run(conditions):
        return sample(model, text, None, empty_latent(96, 64, 17, FPS), Stage(ltx2_sigmas(3), conditions=conditions),
                      torch.Generator().manual_seed(3))

    keyed, held, free = run([EncodedKeyframe(image, 0, 1.0)]), run([EncodedImage(image, 0, 1.0)]), run([])
    assert keyed.video.shape == free.video.shape  # the appended tokens are dropped after the last step
    assert torch.equal(held.video[:, :, :1], image)  # held: kept exactly ...
    assert (keyed.video[:, :, :1] - image).abs().max() > 1e-3  # ... appended: frame 0 is generated
    assert (keyed.video - free.video).abs().max() > 1e-3  # and guided by the keyframe


class _Encoder(torch.nn.Module):
    """A stand-in video encoder: (N, 3, 1, H, W) -> (N, 128, 1, H/32, W/32)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, x):
        pooled = torch.nn.functional.avg_pool3d(x, (1, 32, 32))
        return pooled.mean(1, keepdim=True).expand(-1, 128, -1, -1, -1) * self.scale


def test_encode_images_makes_keyframes_where_asked():
    pixels = np.zeros((64, 96, 3), dtype=np.uint8)
    images = (ImageCondition(pixels, 0, 1.0, 0), ImageCondition(pixels, 8, 0.5, 0, keyframe=True))
    kinds = [type(e) for e in encode_images(images, _Encoder(), 64, 96)]
    assert kinds == [EncodedImage, EncodedKeyframe]
    every = encode_images(images, _Encoder(), 64, 96, keyframes=True)
    assert [type(e) for e in every] == [EncodedKeyframe] * 2 and [(e.frame, e.strength) for e in every] == [
        (0, 1.0), (8, 0.5)]


def test_a_keyframe_flag_that_is_not_a_boolean_is_refused():
    with pytest.raises(ValueError, match="keyframe must be True or False"):
        ImageCondition(np.zeros((64, 96, 3), dtype=np.uint8), 0, 1.0, 0, keyframe="yes").check(17)
