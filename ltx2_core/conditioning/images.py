"""Image conditioning (image-to-video, first/last/any frame) as the reference pipelines do it (`ltx_pipelines` 1.0.0
`combined_image_conditionings`, `media_io.load_image_conditioning`).

Preparing an image: read as RGB uint8; an H.264 round trip at `crf` (PyAV, libx264 `veryfast`, one yuv420p frame of
even size; 0 skips it), which makes a still look like a video frame; bilinear resize (no antialias) so it covers
the generation size, centre crop; values to [-1, 1]; the video VAE encoder (all images of a request in one batch).

Conditioning the sampler (each `EncodedImage` is a `Condition` of the video stream): an image at pixel frame 0
replaces latent frame 0 (its tokens become the clean latent, with denoise mask 1 − strength: strength 1 keeps them
exactly); an image at any other frame is a guiding keyframe, its tokens appended after the video tokens with
positions [f, f + 8) / fps in time (1.0.0; 1.2.0, which LTX-2.5 follows: [f, f + 1) / fps, the image's one pixel
frame, `Release.keyframe_frames`) and the grid's in space, mask 1 − strength, attending to and attended by every
token, and dropped after the last step. Applied in order, so a later frame-0 image wins. (How held and appended
tokens are noised where the noise scale is below 1 also differs between the two: `Release.noise_from_latent`.)
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ltx2_core.conditioning.stream import VIDEO, ConditionedStream
from ltx2_core.geometry import VIDEO_SPACE_SCALE, VIDEO_TIME_SCALE, patchify_video

# ltx_pipelines/utils/constants.py DEFAULT_IMAGE_CRF (1.2.0: 18 from 2.4 on; each release's: `Release.image_crf`)
DEFAULT_IMAGE_CRF = 33
MAX_CRF = 51
LAST_FRAME = -1  # a frame index meaning the video's last frame


class ImageCondition(NamedTuple):
    """An image (file path or RGB uint8 array (H, W, 3)) at pixel frame `frame` (LAST_FRAME: the last, see `at`),
    held with `strength` (1: exactly, 0: not at all), prepared with an H.264 round trip at `crf` (0: none; None:
    the release's, `Release.image_crf`: what the model was trained against). `keyframe`: always appended as
    keyframe tokens, frame 0 too, as the reference's keyframe interpolation (`ltx2_core.conditioning.keyframes`)."""

    image: str | os.PathLike | np.ndarray
    frame: int = 0
    strength: float = 1.0
    crf: int | None = None
    keyframe: bool = False

    def check(self, frames: int) -> None:
        """ValueError naming the fix, before any model work (a file is decoded in full, as it will be read)."""
        if isinstance(self.frame, bool) or not isinstance(self.frame, int) or not 0 <= self.frame < frames:
            raise ValueError(f"image frame must be a pixel frame index in 0..{frames - 1}, got {self.frame!r}")
        if not isinstance(self.strength, (int, float)) or not 0 <= self.strength <= 1:
            raise ValueError(f"image strength must be in [0, 1], got {self.strength!r}")
        if self.crf is not None and (isinstance(self.crf, bool) or not isinstance(self.crf, int)
                                     or not 0 <= self.crf <= MAX_CRF):
            raise ValueError(f"image CRF must be an integer in 0..{MAX_CRF} (0: no H.264 round trip), got {self.crf!r}")
        if not isinstance(self.keyframe, bool):
            raise ValueError(f"image keyframe must be True or False, got {self.keyframe!r}")
        if isinstance(self.image, np.ndarray):
            if self.image.ndim != 3 or self.image.shape[2] != 3 or self.image.dtype != np.uint8:
                raise ValueError(f"an image array must be RGB uint8 (H, W, 3), got {self.image.dtype} "
                                 f"{tuple(self.image.shape)}")
            name, size = "array", (self.image.shape[1], self.image.shape[0])
        else:
            name, size = self.image, _check_image_file(self.image)
        if self.crf != 0 and min(size) < 2:
            raise ValueError(f"image {name} is {size[0]}x{size[1]} pixels; the H.264 round trip needs at least "
                             "2 on each side: use a larger image or CRF 0 (no round trip)")

    def at(self, frames: int) -> ImageCondition:
        """This condition with LAST_FRAME resolved for a video of `frames` pixel frames."""
        return self._replace(frame=frames - 1) if self.frame == LAST_FRAME else self


def _check_image_file(path: str | os.PathLike) -> tuple[int, int]:
    """The image's (width, height) once its structure (chunk checksums) and every pixel decode."""
    from PIL import Image, UnidentifiedImageError

    if os.path.isdir(path):
        raise ValueError(f"image {path} is a folder; give an image file (PNG, JPEG or WebP)")
    if not os.path.isfile(path):
        raise ValueError(f"image {path}: no such file")
    try:
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:  # verify() reads no pixels: a truncated or damaged stream fails only here
            image.load()
            return image.size
    except UnidentifiedImageError as exc:
        raise ValueError(f"image {path} is not an image PIL can read ({exc}); use a PNG, JPEG or WebP") from exc
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        raise ValueError(f"image {path} is damaged or truncated ({exc}); save it again as PNG or JPEG") from exc


def has_transparency(path: str | os.PathLike) -> bool:
    """Whether the image file has pixels that are not fully opaque (alpha below 255, or a palette's transparent
    colour), which `read_image` shows in the colour stored under them."""
    from PIL import Image

    with Image.open(path) as image:
        if image.mode not in ("RGBA", "LA", "PA", "RGBa", "La") and "transparency" not in image.info:
            return False
        return image.convert("RGBA").getchannel("A").getextrema()[0] < 255


def read_image(path: str | os.PathLike) -> np.ndarray:
    """RGB uint8 (H, W, 3); an alpha channel is dropped, not composited, as both reference pipelines do (1.0.0
    keeps the first three channels, 1.2.0 converts RGBA to RGB): a transparent pixel shows the colour stored under
    it (`has_transparency` tells the caller). 16-bit grayscale is scaled to 8 bits (PIL's own conversion clips it),
    other modes converted to RGB."""
    from PIL import Image

    with Image.open(path) as image:
        if image.mode.startswith("I"):  # I;16 (16-bit PNG), I;16B, I: 0..65535
            gray = np.asarray(image, dtype=np.float64)
            return np.repeat((gray / 257).round().clip(0, 255).astype(np.uint8)[..., None], 3, axis=2)
        if image.mode not in ("RGB", "RGBA"):
            image = image.convert("RGB")
        return np.array(image)[..., :3]


def h264_round_trip(image: np.ndarray, crf: int = DEFAULT_IMAGE_CRF) -> np.ndarray:
    """The image encoded as one H.264 frame at `crf` and decoded again (cropped to even sides); 0: unchanged."""
    if crf == 0:
        return image
    import av

    height, width = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=1, options={"crf": str(crf), "preset": "veryfast"})
        stream.height, stream.width = height, width
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[:height, :width]), format="rgb24")
        container.mux(stream.encode(frame.reformat(format="yuv420p")))
        container.mux(stream.encode())
    buffer.seek(0)
    with av.open(buffer) as container:
        return next(container.decode(container.streams.video[0])).to_ndarray(format="rgb24")


def resize_and_crop(image: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(H, W, 3) float 0..255 -> (1, 3, 1, height, width): bilinear (no antialias) to cover, then centre crop."""
    x = image.permute(2, 0, 1)[None]
    scale = max(height / x.shape[2], width / x.shape[3])
    size = (math.ceil(x.shape[2] * scale), math.ceil(x.shape[3] * scale))
    x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    top, left = (size[0] - height) // 2, (size[1] - width) // 2
    return x[:, :, top:top + height, left:left + width][:, :, None]


def prepare_image(condition: ImageCondition, height: int, width: int, device: torch.device | str = "cpu",
                  dtype: torch.dtype = torch.float32, crf: int = DEFAULT_IMAGE_CRF) -> torch.Tensor:
    """The encoder's input for one image at the generation size: (1, 3, 1, height, width) in [-1, 1]; `crf`: the
    round trip's where the condition leaves it to the release."""
    pixels = condition.image if isinstance(condition.image, np.ndarray) else read_image(condition.image)
    pixels = h264_round_trip(pixels, crf if condition.crf is None else condition.crf)
    x = resize_and_crop(torch.tensor(pixels, dtype=torch.float32, device=device), height, width)
    return (x / 127.5 - 1.0).to(dtype)


class EncodedImage(NamedTuple):
    """An encoded image held at a pixel frame (a `Condition` of the video): latent (1, 128, 1, H/32, W/32), its
    pixel frame and strength. Frame 0 holds the first latent frame's tokens; any other frame appends keyframe
    tokens (module docstring)."""

    latent: torch.Tensor
    frame: int
    strength: float
    modality = VIDEO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        image = patchify_video(self.latent.to(device=stream.clean.device, dtype=stream.clean.dtype))
        if self.frame == 0:
            return stream.hold(0, image, 1.0 - self.strength)
        rows, cols = self.latent.shape[3:]
        # the reference builds a keyframe's mask in the latent's dtype (bf16 in real runs)
        mask = torch.full((1, image.shape[1], 1), 1.0 - self.strength, dtype=image.dtype,
                          device=stream.clean.device).float()
        positions = keyframe_positions(self.frame, rows, cols, stream.fps, stream.clean.device, stream.keyframe_frames)
        return stream.append(image, mask, positions)


@torch.no_grad()
def encode_conditions(conditions: Sequence[ImageCondition], encoder: torch.nn.Module, height: int,
                      width: int, crf: int = DEFAULT_IMAGE_CRF) -> list[EncodedImage]:
    """Every image prepared at height × width and encoded in one batch by the video VAE encoder; `crf`: the
    release's (`Release.image_crf`), for the images that leave it to the release."""
    if not conditions:
        return []
    param = next(encoder.parameters())
    images = torch.cat([prepare_image(c, height, width, param.device, param.dtype, crf) for c in conditions])
    latents = encoder(images)
    return [EncodedImage(latents[i:i + 1], c.frame, float(c.strength)) for i, c in enumerate(conditions)]


def keyframe_positions(frame: int, rows: int, cols: int, fps: float, device: torch.device | str | None = None,
                       span: int = VIDEO_TIME_SCALE) -> torch.Tensor:
    """(1, 3, rows·cols, 2) bounds of a keyframe's tokens: time [frame, frame + span) / fps (the release's
    `keyframe_frames`: 8, a latent frame's, in 1.0.0; 1, the image's one pixel frame, in 1.2.0), space the
    grid's."""
    grid = torch.meshgrid(torch.arange(rows, device=device), torch.arange(cols, device=device), indexing="ij")
    starts = torch.stack(grid).flatten(1).float() * VIDEO_SPACE_SCALE  # (2, tokens)
    space = torch.stack([starts, starts + VIDEO_SPACE_SCALE], dim=-1)
    time = torch.tensor([frame, frame + span], dtype=torch.float32, device=device) / fps
    return torch.cat([time.expand(1, starts.shape[1], 2), space])[None]
