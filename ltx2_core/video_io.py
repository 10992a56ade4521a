"""Reading a video file to condition a generation on (sound for a silent video; later a retake's source), as the
reference reads an mp4 (ltx-pipelines 1.2.0 `video_latent_from_file` with the shape `get_videostream_metadata`
gives): PyAV, the first video stream; its size, frame count and frame rate from the stream header (`VideoInfo`);
the frames decoded from `start` for `frames` frames by their timestamps, as RGB uint8, each resized (bilinear, no
antialias) to cover the target size and centre-cropped (at the file's own size: an exact copy), then mapped to
[-1, 1] as x / 127.5 − 1 (`read_video`).

The same video can come as frames in memory (`VideoFrames`: (F, H, W, 3) float in [0, 1], ComfyUI's IMAGE layout,
and a frame rate): every function here takes either (`VideoSource`), and frames are read exactly as a file's decoded
frames are (clamped to [0, 1], x · 255, the same resize and crop, x / 127.5 − 1; frame i at i / fps seconds), with
the same checks.

Every bad file is refused with a ValueError that names the fix before any model work (`check_video_file`): a missing,
unreadable or damaged file, one without a video stream or frame rate, a size that is not a multiple of 32 or a frame
count that is not 8k+1 (the latent's geometry; the reference's retake refuses both alike), fewer than 9 frames, a
header whose frame count the stream does not decode to. Where we differ from the reference: it encodes the frames in
tiles of 80 frames and 768 pixels (`TileSizeConfig.default()`), we in one piece (the same for clips up to 80 frames
and 768 pixels); a frame count off the header is refused where it would crop or pad the latent with zeros; a
frame's place is its timestamp times the rate, rounded, where the reference compares float times (which at 24 fps
takes one frame too many for 17, 25, 65, 89, 97 or 121 frames of a longer file).
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ltx2_core.geometry import VIDEO_SPACE_SCALE, VIDEO_TIME_SCALE, is_frame_count

MIN_FRAMES = VIDEO_TIME_SCALE + 1  # one latent frame after the first: the shortest clip worth a sound (0.375 s at 24)


class VideoInfo(NamedTuple):
    """A video file's first video stream as its header states it (the reference's `get_videostream_metadata`):
    `width` × `height` pixels, `frames` frames (counted by decoding where the header has no count), `fps` (the
    stream's average rate), and whether the file also holds an audio stream (`has_sound`)."""

    width: int
    height: int
    frames: int
    fps: float
    has_sound: bool

    @property
    def seconds(self) -> float:
        return self.frames / self.fps


# how far IMAGE values may stray outside [0, 1] (a float decoder's YUV -> RGB overshoot, which ComfyUI's Load Video
# keeps) before they are refused as another scale; within it they are clamped, as an 8-bit decode clamps them
FRAME_SLACK = 0.1


class VideoFrames(NamedTuple):
    """A video in memory: `pixels` (F, H, W, 3) float RGB in [0, 1] (ComfyUI's IMAGE; any device), `fps` frames a
    second (frame i shows at i / fps seconds)."""

    pixels: torch.Tensor
    fps: float

    @property
    def name(self) -> str:
        shape = "x".join(map(str, self.pixels.shape[:3])) if isinstance(self.pixels, torch.Tensor) else "?"
        return f"video frames ({shape}, frames x height x width)"

    def info(self) -> VideoInfo:
        """As `video_info` reads a file's header (no sound: a sound in memory travels beside the frames); ValueError
        naming the fix for anything that is not (F ≥ 1, H ≥ 1, W ≥ 1, 3) float in [0, 1] at a positive rate."""
        pixels, fps = self.pixels, self.fps
        if not isinstance(pixels, torch.Tensor) or pixels.dim() != 4 or pixels.shape[-1] != 3:
            shape = tuple(pixels.shape) if isinstance(pixels, torch.Tensor) else type(pixels).__name__
            raise ValueError(f"video frames must be (frames, height, width, 3) RGB, ComfyUI's IMAGE, got {shape}; "
                             "connect Load Video -> Get Video Components (images) or another IMAGE batch")
        if min(pixels.shape[:3]) == 0:
            raise ValueError(f"{self.name} is empty; give at least one frame (check the video loader's frame cap and "
                             "skip)")
        if not pixels.is_floating_point():
            raise ValueError(f"{self.name} must be float in [0, 1], got {pixels.dtype}; scale 8-bit frames by 1/255")
        if isinstance(fps, bool) or not isinstance(fps, (int, float, Fraction)) or not math.isfinite(fps) \
                or not fps > 0:
            raise ValueError(f"{self.name}: the frame rate must be a positive number of frames a second, got "
                             f"{fps!r}; wire the loader's fps")
        low, high = float(pixels.amin()), float(pixels.amax())  # NaN compares false: refused too
        if not (-FRAME_SLACK <= low and high <= 1 + FRAME_SLACK):
            raise ValueError(f"{self.name} holds values in [{low:g}, {high:g}]; IMAGE frames are floats in [0, 1]: "
                             "clamp or rescale them first")
        frames, height, width = pixels.shape[:3]
        return VideoInfo(int(width), int(height), int(frames), float(fps), False)


VideoSource = str | os.PathLike | VideoFrames  # a video file's path, or its frames in memory


def video_name(source: VideoSource) -> str:
    """How messages name a video: `video file PATH` or `video frames (FxHxW, ...)`."""
    return source.name if isinstance(source, VideoFrames) else f"video file {Path(source)}"


class _Opened:
    """`av.open(path)` with its first video stream, every failure a ValueError naming the file and the fix."""

    def __init__(self, path: str | os.PathLike):
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise ValueError(f"a video file must be given as a path (a non-empty str or Path), got {path!r}")
        self.path = Path(path)
        self.name = f"video file {self.path}"
        if not self.path.exists():
            raise ValueError(f"{self.name} does not exist; check the path")
        if self.path.is_dir():
            raise ValueError(f"{self.name} is a folder; give a video file (.mp4, .mov, .mkv, .webm)")

    def __enter__(self):
        import av
        from av.error import FFmpegError

        try:
            self.container = av.open(os.fspath(self.path))
        except FFmpegError as exc:
            raise self.unreadable(exc) from exc
        stream = next((s for s in self.container.streams if s.type == "video"), None)
        if stream is None:
            self.container.close()
            raise ValueError(f"{self.name} has no video stream; give a video file (an audio file has no frames to "
                             "add sound to)")
        return self.container, stream

    def __exit__(self, *exc_info) -> None:
        self.container.close()

    def unreadable(self, exc: Exception) -> ValueError:
        reason = getattr(exc, "strerror", None) or str(exc)
        return ValueError(f"cannot read {self.name} ({reason}): it is damaged or not a video PyAV can decode; "
                          f"re-encode it, e.g. ffmpeg -i {self.path.name} -c:v libx264 fixed.mp4")


def video_info(path: VideoSource) -> VideoInfo:
    """The size, frame count and frame rate of the first video stream of `path`, as the reference reads them (the
    header's frame count, else the decoded frames counted). ValueError naming the fix for a missing, unreadable or
    damaged file, one without a video stream, or one without a frame rate. Frames in memory: `VideoFrames.info`."""
    if isinstance(path, VideoFrames):
        return path.info()
    from av.error import FFmpegError

    opened = _Opened(path)
    with opened as (container, stream):
        rate = stream.average_rate
        if rate is None or not rate > 0:
            raise ValueError(f"{opened.name} states no frame rate; re-encode it at a constant rate, e.g. ffmpeg -i "
                             f"{opened.path.name} -r 24 fixed.mp4")
        frames = stream.frames or 0
        if frames == 0:
            try:
                frames = sum(1 for _ in container.decode(stream))
            except FFmpegError as exc:
                raise opened.unreadable(exc) from exc
        width, height = stream.codec_context.width, stream.codec_context.height
        has_sound = any(s.type == "audio" for s in container.streams)
    return VideoInfo(int(width), int(height), int(frames), float(rate), has_sound)


def check_video_file(path: VideoSource) -> VideoInfo:
    """`video_info` of a file whose frames can be conditioned on as they are: width and height multiples of 32,
    8k+1 frames (at least 9), and every frame decodes (the file is decoded once, here, before any model work).
    ValueError naming the fix otherwise. Frames in memory: the same size and count checks."""
    info = video_info(path)
    if isinstance(path, VideoFrames):
        return _check_frames(path, info)
    name = f"video file {Path(path)}"
    if info.width % VIDEO_SPACE_SCALE or info.height % VIDEO_SPACE_SCALE or min(info.width, info.height) <= 0:
        width, height = (max(VIDEO_SPACE_SCALE, s // VIDEO_SPACE_SCALE * VIDEO_SPACE_SCALE)
                         for s in (info.width, info.height))
        raise ValueError(f"{name} is {info.width}x{info.height}; width and height must be multiples of "
                         f"{VIDEO_SPACE_SCALE}: crop or scale it, e.g. ffmpeg -i {Path(path).name} -vf "
                         f"crop={width}:{height} fixed.mp4")
    if info.frames < MIN_FRAMES:
        raise ValueError(f"{name} has {info.frames} frame(s) ({info.seconds:.3f} s); it needs at least "
                         f"{MIN_FRAMES} (8k+1 frames, k ≥ 1): give a longer video")
    if not is_frame_count(info.frames):
        fewer = (info.frames - 1) // VIDEO_TIME_SCALE * VIDEO_TIME_SCALE + 1
        raise ValueError(f"{name} has {info.frames} frames; the frame count must be 8k+1 (e.g. 97, 121): keep the "
                         f"first {fewer}, e.g. ffmpeg -i {Path(path).name} -frames:v {fewer} fixed.mp4")
    decoded = sum(1 for _ in _decoded_frames(path, 0.0, info.frames, info.fps))
    if decoded != info.frames:
        raise ValueError(f"{name} says it has {info.frames} frames and {decoded} decode within its "
                         f"{info.seconds:.3f} s; re-encode it, e.g. ffmpeg -i {Path(path).name} -c:v libx264 "
                         "fixed.mp4")
    return info


def _check_frames(frames: VideoFrames, info: VideoInfo) -> VideoInfo:
    """`check_video_file`'s size and count rules for frames in memory, the fixes in a graph's terms."""
    if info.width % VIDEO_SPACE_SCALE or info.height % VIDEO_SPACE_SCALE:
        width, height = (max(VIDEO_SPACE_SCALE, s // VIDEO_SPACE_SCALE * VIDEO_SPACE_SCALE)
                         for s in (info.width, info.height))
        raise ValueError(f"{frames.name} is {info.width}x{info.height}; width and height must be multiples of "
                         f"{VIDEO_SPACE_SCALE}: crop or scale the frames first, e.g. to {width}x{height}")
    if info.frames < MIN_FRAMES:
        raise ValueError(f"{frames.name} has {info.frames} frame(s) ({info.seconds:.3f} s); it needs at least "
                         f"{MIN_FRAMES} (8k+1 frames, k ≥ 1): give a longer video")
    if not is_frame_count(info.frames):
        fewer = (info.frames - 1) // VIDEO_TIME_SCALE * VIDEO_TIME_SCALE + 1
        raise ValueError(f"{frames.name} has {info.frames} frames; the frame count must be 8k+1 (e.g. 97, 121): keep "
                         f"the first {fewer} (the video loader's frame cap)")
    return info


def _decoded_frames(path: str | os.PathLike, start: float, count: int, fps: float):
    """The `count` frames (H, W, 3) uint8 numpy arrays from `start` seconds, as the reference's
    `decode_video_from_file` picks them by their timestamps (a stream without timestamps: by index at `fps`). A
    frame's place is its timestamp times `fps`, rounded: the float product of a timestamp and the time base lands a
    hair below or above a whole frame (17 · 512 / 12288 s < 17 / 24 s), and comparing times would take a frame
    beyond the clip at 24 fps."""
    from av.error import FFmpegError

    opened = _Opened(path)
    first = round(start * fps)
    with opened as (container, stream):
        time_base = stream.time_base
        try:
            if start > 0:
                container.seek(int(start / float(time_base)), stream=stream)
            for frame in container.decode(stream):
                if frame.pts is None:  # no timestamps at all: frames by index (the reference's fallback)
                    yield from _frames_by_index(path, first, count)
                    return
                index = round(frame.pts * time_base * Fraction(fps))
                if index < first:
                    continue
                if index >= first + count:
                    break
                yield frame.to_rgb().to_ndarray()
        except FFmpegError as exc:
            raise opened.unreadable(exc) from exc


def _frames_by_index(path: str | os.PathLike, first: int, count: int):
    opened = _Opened(path)
    with opened as (container, stream):
        for index, frame in enumerate(container.decode(stream)):
            if index < first:
                continue
            if index >= first + count:
                break
            yield frame.to_rgb().to_ndarray()


def resize_and_crop_frames(frames: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(F, H, W, 3) float 0..255 -> (1, 3, F, height, width): each frame bilinear (no antialias) to cover the target,
    then centre-cropped (the reference's `resize_and_center_crop`; at the frames' own size an exact copy)."""
    x = frames.permute(0, 3, 1, 2)
    scale = max(height / x.shape[2], width / x.shape[3])
    size = (math.ceil(x.shape[2] * scale), math.ceil(x.shape[3] * scale))
    x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    top, left = (size[0] - height) // 2, (size[1] - width) // 2
    return x[:, :, top:top + height, left:left + width].permute(1, 0, 2, 3)[None]


def resize_and_reflect_pad_frames(frames: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(F, H, W, 3) float 0..255 -> (1, 3, F, height, width): each frame scaled (bilinear, no antialias) to fit
    inside the target with its aspect ratio kept (not at all when it already fits), then padded at the bottom and
    right by reflection (by repeating the edge where the pad is not shorter than the picture), as the reference's
    `resize_and_reflect_pad` (the HDR IC-LoRA's input)."""
    x = frames.permute(0, 3, 1, 2)
    rows, cols = x.shape[2:]
    if height < rows or width < cols:
        scale = min(height / rows, width / cols)
        rows, cols = round(rows * scale), round(cols * scale)
        x = F.interpolate(x, size=(rows, cols), mode="bilinear", align_corners=False)
    bottom, right = height - rows, width - cols
    if bottom > 0 or right > 0:
        x = F.pad(x, (0, right, 0, bottom), mode="reflect" if bottom < rows and right < cols else "replicate")
    return x.permute(1, 0, 2, 3)[None]


def read_video(path: VideoSource, height: int | None = None, width: int | None = None, *,
               start: float = 0.0, frames: int | None = None, fps: float | Fraction | None = None,
               device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
               reflect_pad: bool = False) -> torch.Tensor:
    """The video encoder's input: `frames` frames of `path` from `start` seconds (None: the whole file from its
    header) at height × width (None: the file's), as (1, 3, F, height, width) in [-1, 1] on `device` in `dtype`.
    `fps` must equal the file's where given (the reference refuses another rate). ValueError naming the fix for a
    bad file, or when fewer frames decode than asked for. `VideoFrames` are read alike: frames [round(start · fps),
    + frames) of the batch, clamped to [0, 1] and times 255 (a decoded file's 0..255 values), then resized and
    mapped the same. `reflect_pad`: fitted inside height × width and reflect-padded
    (`resize_and_reflect_pad_frames`) instead of covering it and centre-cropped."""
    info = video_info(path)
    name = video_name(path)
    if fps is not None and float(fps) != info.fps:
        fix = (f"re-encode the video, e.g. ffmpeg -i {Path(path).name} -r {float(fps):g} fixed.mp4"
               if not isinstance(path, VideoFrames) else "give the frames' own rate")
        raise ValueError(f"{name} runs at {info.fps:g} fps and the clip at {float(fps):g}; generate at {info.fps:g} "
                         f"fps or {fix}")
    count = info.frames if frames is None else frames
    if isinstance(path, VideoFrames):
        first = round(start * info.fps)
        pixels = path.pixels[first:first + count].to(device=device, dtype=torch.float32).clamp(0, 1) * 255.0
    else:
        decoded = [torch.from_numpy(frame) for frame in _decoded_frames(path, start, count, info.fps)]
        pixels = torch.stack(decoded).to(device=device, dtype=torch.float32) if decoded else torch.zeros(0)
    if pixels.shape[0] < count:
        raise ValueError(f"{name} gives {pixels.shape[0]} frames from {start:g} s and the clip needs {count}; give a "
                         "longer video or an earlier start")
    resize = resize_and_reflect_pad_frames if reflect_pad else resize_and_crop_frames
    video = resize(pixels, info.height if height is None else height, info.width if width is None else width)
    return (video / 127.5 - 1.0).to(dtype)
