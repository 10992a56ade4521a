"""TEMPORARY (lead's local stand-in until the helper's module merges; not to be committed)."""
import torch
from ltx2_core.types import TextEmbeddings


def from_native(conditioning, connectors, video_width):
    tensor, options = conditioning[0]
    video, audio = tensor[..., :video_width], tensor[..., video_width:]
    return TextEmbeddings(video, audio), options.get("frame_rate")


def to_native(embeddings, frame_rate=None):
    options = {} if frame_rate is None else {"frame_rate": frame_rate}
    return [[torch.cat((embeddings.video, embeddings.audio), -1), options]]
