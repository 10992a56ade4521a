"""Image conditioning in the sampler: an image at frame 0 held with strength 1 comes out exactly as encoded, a
keyframe's tokens guide the run and are dropped after it, masks and positions are the reference's, and bad image
settings are refused before any model work."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import EncodedImage, ImageCondition, condition_video
from ltx2_core.conditioning.images import h264_round_trip, keyframe_positions, prepare_image
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import patchify_video, video_positions
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings


@pytest.fixture(scope="module")
def model():
    return demo_transformer(TransformerConfig.tiny("2.0"))


def _text(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    config = model.config
    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)
    return TextEmbeddings(*(torch.randn(1, 7, w, generator=g) for w in widths))


def _run(model, conditions, seed=3):
    latent = empty_latent(96, 64, 17, 24.0)
    return sample(model, _text(model), None, latent, Stage(ltx2_sigmas(3), conditions=conditions),
                  torch.Generator().manual_seed(seed))


def test_frame_zero_at_strength_one_is_held_exactly(model):
    image = torch.randn(1, 128, 1, 2, 3)
    out = _run(model, [EncodedImage(image, 0, 1.0)])
    assert torch.equal(out.video[:, :, :1], image)  # mask 0: noise·0 + clean, x0 blended to clean, velocity 0
    free = _run(model, [])
    assert (out.video[:, :, 1:] - free.video[:, :, 1:]).abs().max() > 1e-3  # and it steers the other frames
    half = _run(model, [EncodedImage(image, 0, 0.5)])
    assert (half.video[:, :, :1] - image).abs().max() > 1e-3  # strength 0.5 lets it change


def test_a_keyframe_guides_the_run_and_its_tokens_are_dropped(model):
    image = torch.randn(1, 128, 1, 2, 3)
    keyed = _run(model, [EncodedImage(image, 16, 1.0)])
    free = _run(model, [])
    assert keyed.video.shape == free.video.shape and keyed.audio.shape == free.audio.shape
    assert (keyed.video - free.video).abs().max() > 1e-3


def test_masks_and_positions_of_a_replacement_and_a_keyframe():
    clean = torch.zeros(1, 3 * 2 * 3, 128)
    positions = video_positions(3, 2, 3, 24.0)
    first, key = torch.randn(1, 128, 1, 2, 3), torch.randn(1, 128, 1, 2, 3)
    video = condition_video(clean, positions, [EncodedImage(first, 0, 0.8), EncodedImage(key, 12, 0.3)],
                            24.0)
    assert video.tokens == 18 and video.clean.shape[1] == 24 and video.positions.shape[2] == 24
    assert torch.equal(video.clean[:, :6], patchify_video(first)) and torch.equal(video.clean[:, 18:],
                                                                                 patchify_video(key))
    torch.testing.assert_close(video.mask[0, :6, 0], torch.full((6,), 0.2), atol=1e-7, rtol=0)
    torch.testing.assert_close(video.mask[0, 6:18, 0], torch.ones(12), atol=0, rtol=0)
    torch.testing.assert_close(video.mask[0, 18:, 0], torch.full((6,), 0.7), atol=1e-7, rtol=0)
    keyframe = keyframe_positions(12, 2, 3, 24.0)
    torch.testing.assert_close(keyframe[0, 0, 0], torch.tensor([12 / 24, 20 / 24]), atol=1e-7, rtol=0)
    torch.testing.assert_close(keyframe[0, 1:], positions[0, 1:, :6], atol=0, rtol=0)  # the grid's space


def test_prepared_images_cover_the_size_in_the_encoder_range(tmp_path):
    rgb = (np.arange(90 * 120 * 3) % 251).astype(np.uint8).reshape(90, 120, 3)
    Image.fromarray(rgb).save(tmp_path / "a.png")
    x = prepare_image(ImageCondition(str(tmp_path / "a.png"), crf=0), 64, 64)
    assert x.shape == (1, 3, 1, 64, 64) and x.min() >= -1 and x.max() <= 1
    assert h264_round_trip(rgb[:89, :119], 33).shape == (88, 118, 3)  # even sides


@pytest.mark.parametrize("condition, message", [
    (ImageCondition("x.png", frame=17), "pixel frame index in 0..16"),
    (ImageCondition("x.png", strength=1.5), "strength must be in \\[0, 1\\]"),
    (ImageCondition("x.png", crf=60), "CRF must be an integer in 0..51"),
    (ImageCondition("missing.png"), "no such file"),
])
def test_bad_image_settings_are_refused_naming_the_fix(tmp_path, condition, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")
    (tmp_path / "not-an-image.png").write_text("hello")
    with pytest.raises(ValueError, match=message):
        condition.check(17)
    with pytest.raises(ValueError, match="not an image PIL can read"):
        ImageCondition("not-an-image.png").check(17)


def test_conditioned_steps_keep_zero_host_syncs(model):
    """A frame-0 image and a keyframe: per-token timesteps, the clean blend and the appended tokens add no sync
    and no host copy to a step, and every step has the same shapes."""
    from ltx2_core.sampling import guided_step
    from ltx2_core.sampling.guidance import default_guidance
    from support.census import OpCensus

    censuses, shapes = [], []

    def counted(plan, video, audio, sigma, sigma_next):
        with OpCensus() as census:
            out = guided_step(plan, video, audio, sigma, sigma_next)
        censuses.append(census)
        shapes.append(tuple(video.latent.shape))
        return out

    image = torch.randn(1, 128, 1, 2, 3)
    video_guidance, audio_guidance = default_guidance("2.0", model.config.num_layers)
    conditions = [EncodedImage(image, 0, 0.9), EncodedImage(image, 16, 1.0)]
    stage = Stage(ltx2_sigmas(3), video_guidance=video_guidance, audio_guidance=audio_guidance, conditions=conditions)
    sample(model, _text(model), _text(model, 1), empty_latent(96, 64, 17, 24.0), stage,
           torch.Generator().manual_seed(0), step=counted)
    assert len(censuses) == 3 and all(c.syncs() == {} and c.transfers() == 0 for c in censuses)
    assert len(set(shapes)) == 1 and shapes[0][1] == 3 * 2 * 3 + 2 * 3  # video + keyframe tokens, every step
