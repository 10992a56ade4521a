"""Image conditioning: an image held at a frame of the video (image-to-video, last frame, keyframes), chainable."""

from __future__ import annotations

import torch

from ltx2_core.conditioning.images import LAST_FRAME, MAX_CRF, ImageCondition

from .validation import stated_limits

RELEASE_CRF = -1  # the crf widget's "the model's" (`Release.image_crf`)
IMAGES = "LTX2_IMAGES"


class LTX2ImageCondition:
    DESCRIPTION = ("Holds an image at a frame of the video: frame 0 for image-to-video, -1 for the last frame, any "
                   "other frame as a keyframe. Chain several for first-last-frame or keyframe interpolation. With "
                   "keyframe on, the image is always appended as keyframe tokens, frame 0 too, as Lightricks' "
                   "KeyframeInterpolation pipeline does (LTX-2 Generate's mode keyframes sets it for every image).")
    CATEGORY = "LTX-2/conditioning"
    RETURN_TYPES = (IMAGES,)
    RETURN_NAMES = ("images",)
    FUNCTION = "add"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "image": ("IMAGE", {"tooltip": "the picture (its first image if a batch); resized to cover the video "
                                "and centre-cropped"}),
            "frame": ("INT", {"default": 0, "min": LAST_FRAME, "max": 1440, "tooltip": "pixel frame to hold it at: 0 "
                              "starts the video from it, -1 ends it there, others guide that moment"}),
            "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01, "tooltip": "1 holds it "
                                   "exactly, lower lets the model change it"}),
            "crf": ("INT", {"default": RELEASE_CRF, "min": RELEASE_CRF, "max": MAX_CRF, "tooltip": "H.264 quality "
                            "of the round trip that makes a still look like a video frame; -1: the model's (the "
                            "reference's 33 for LTX-2.0/2.3, 18 for LTX-2.5); 0 skips it. Too clean an image tends "
                            "to give a frozen video"}),
        }, "optional": {
            "images": (IMAGES, {"tooltip": "earlier image conditions to add this one to"}),
            "keyframe": ("BOOLEAN", {"default": False, "tooltip": "append the image as keyframe tokens at its frame, "
                                     "frame 0 too (Lightricks' KeyframeInterpolation pipeline: the first frame is "
                                     "generated, guided by the image); off: frame 0 replaces the first latent frame "
                                     "(image-to-video, their TI2Vid pipeline)"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, strength: float | None = None):
        """The strength's limits, NaN too (ComfyUI's own range check lets NaN pass)."""
        return stated_limits(cls, "strength", strength) or True

    def add(self, image: torch.Tensor, frame: int, strength: float = 1.0, crf: int = RELEASE_CRF,
            images: tuple[ImageCondition, ...] = (), keyframe: bool = False):
        if image.ndim != 4 or not 1 <= image.shape[-1] <= 4:
            raise ValueError(f"image must be a ComfyUI IMAGE (batch, height, width, channels) with 1 to 4 channels, "
                             f"got shape {tuple(image.shape)}")
        pixels = first_frame_uint8(image)
        crf = None if crf == RELEASE_CRF else int(crf)  # None: the release's, resolved by the sampler
        return (tuple(images) + (ImageCondition(pixels, int(frame), float(strength), crf, bool(keyframe)),),)


def first_frame_uint8(image: torch.Tensor):
    """A ComfyUI IMAGE's first frame as RGB uint8 (H, W, 3) (gray expanded, alpha dropped; IMAGE values are 0..1)."""
    rgb = image[0, ..., :3] if image.shape[-1] >= 3 else image[0, ..., :1].expand(-1, -1, 3)  # gray (+ alpha)
    return (rgb.clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()


def at_frames(images: tuple[ImageCondition, ...], frames: int) -> tuple[ImageCondition, ...]:
    """The images with LAST_FRAME resolved for a video of `frames` pixel frames, each checked (ValueError)."""
    resolved = tuple(image.at(frames) for image in images)
    for image in resolved:
        image.check(frames)
    return resolved
