"""A real H.264 mp4 written with PyAV, like a control video (canny, depth) or an attention mask video."""

from __future__ import annotations

import av
import numpy as np

SIZE, FRAMES, FPS = 64, 9, 24


def write_video(path, width: int = SIZE, height: int = SIZE, frames: int = FRAMES, fps: int = FPS, seed: int = 0):
    """A real H.264 mp4 (PyAV) of moving edges plus noise, like a control video (canny, depth)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            edges = (((x + 3 * i) // 8 + y // 8) % 2 * 200).astype(np.float64)
            image = np.clip(edges[..., None] + rng.normal(0, 10, (height, width, 3)), 0, 255).astype(np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    return path
