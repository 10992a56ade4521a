"""Image conditioning against the reference (ltx_pipelines 1.0.0 media_io, ltx_core conditioning items), fp32:
the H.264 round trip and the prepared image within 1/255 of the reference's, and the conditioned video state
(clean tokens, denoise mask, positions) of a frame-0 replacement plus a keyframe equal to ltx_core's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from ltx2_core.conditioning import EncodedImage, ImageCondition, condition_video
from ltx2_core.conditioning.images import h264_round_trip, prepare_image
from ltx2_core.geometry import patchify_video, video_positions
from support.reference import import_ltx_pipelines


@pytest.fixture(scope="module")
def picture(tmp_path_factory):
    y, x = np.mgrid[0:101, 0:75]
    rgb = np.stack([(x * 3) % 256, (y * 2) % 256, (x + y) % 256], axis=-1).astype(np.uint8)
    path = tmp_path_factory.mktemp("image") / "picture.png"
    Image.fromarray(rgb).save(path)
    return path, rgb


@pytest.mark.parametrize("crf", [0, 33, 18])
def test_the_h264_round_trip_and_the_prepared_image_equal_the_references(picture, crf):
    import_ltx_pipelines()
    from ltx_pipelines.utils.media_io import load_image_conditioning, preprocess

    path, rgb = picture
    ours, theirs = h264_round_trip(rgb, crf), preprocess(rgb, crf)
    assert ours.shape == theirs.shape
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    for height, width in ((64, 64), (128, 96)):
        want = load_image_conditioning(str(path), height, width, torch.float32, "cpu", crf=crf)
        got = prepare_image(ImageCondition(str(path), crf=crf), height, width)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1 / 127.5, rtol=0)  # 1/255 of the 0..255 range


def test_a_replacement_and_a_keyframe_build_the_references_state():
    import_ltx_pipelines()
    from ltx_core.components.patchifiers import VideoLatentPatchifier
    from ltx_core.conditioning.types.keyframe_cond import VideoConditionByKeyframeIndex
    from ltx_core.conditioning.types.latent_cond import VideoConditionByLatentIndex
    from ltx_core.tools import VideoLatentTools
    from ltx_core.types import VideoLatentShape, VideoPixelShape

    fps, frames, height, width = 24.0, 25, 64, 96
    generator = torch.Generator().manual_seed(0)
    first, key = (torch.randn(1, 128, 1, 2, 3, generator=generator) for _ in range(2))
    tools = VideoLatentTools(VideoLatentPatchifier(1), VideoLatentShape.from_pixel_shape(
        VideoPixelShape(1, frames, height, width, fps)), fps)
    state = tools.create_initial_state("cpu", torch.float32)
    for item in (VideoConditionByLatentIndex(latent=first, strength=0.8, latent_idx=0),
                 VideoConditionByKeyframeIndex(keyframes=key, frame_idx=16, strength=0.3)):
        state = item.apply_to(state, tools)
    clean = torch.zeros(1, 4 * 2 * 3, 128)
    ours = condition_video(clean, video_positions(4, 2, 3, fps), [EncodedImage(first, 0, 0.8),
                                                                   EncodedImage(key, 16, 0.3)], fps)
    torch.testing.assert_close(ours.clean, state.clean_latent, atol=0, rtol=0)  # pure copies of the latents
    torch.testing.assert_close(ours.mask, state.denoise_mask.float(), atol=1e-7, rtol=0)
    torch.testing.assert_close(ours.positions, state.positions.float(), atol=1e-6, rtol=0)
    assert torch.equal(patchify_video(first), ours.clean[:, :6])


def test_encoded_images_equal_the_reference_pipelines_conditionings(picture):
    """`combined_image_conditionings` (the reference's I2V helper) vs `encode_conditions` on encoders holding the
    same weights: the same latents for a frame-0 image and a keyframe (ours encodes both in one batch)."""
    import_ltx_pipelines()
    from ltx_pipelines.utils.args import ImageConditioningInput
    from ltx_pipelines.utils.helpers import combined_image_conditionings

    from ltx2_core.conditioning.images import encode_conditions
    from support.configs import TINY_VAES
    from support.video_vae import video_vae_pair

    path, _ = picture
    ours_encoder, ref_encoder = video_vae_pair(TINY_VAES["2.0"], "encoder", seed=2)
    images = [ImageCondition(str(path), 0, 0.9, 33), ImageCondition(str(path), 16, 1.0, 0)]
    got = encode_conditions(images, ours_encoder, 64, 96)
    want = combined_image_conditionings([ImageConditioningInput(str(path), i.frame, i.strength, i.crf)
                                         for i in images], 64, 96, ref_encoder, torch.float32, torch.device("cpu"))
    for ours, theirs in zip(got, want):
        reference_latent = getattr(theirs, "latent", None)
        reference_latent = reference_latent if reference_latent is not None else theirs.keyframes
        torch.testing.assert_close(ours.latent, reference_latent, atol=1e-5, rtol=1e-5)
        assert ours.strength == theirs.strength
