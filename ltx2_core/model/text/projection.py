"""Gemma hidden states -> the DiT's video and audio text contexts (spec §2): feature extractor, then one embeddings
connector per stream. Parameter names follow the reference `EmbeddingsProcessor` (`feature_extractor.*`,
`video_connector.*`, `audio_connector.*`), the loader maps the checkpoint keys onto them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ltx2_core.model.text.connector import EmbeddingsConnector
from ltx2_core.model.text.features import MeanRangeFeatures, PerTokenRmsFeatures
from ltx2_core.model.text.config import FeatureExtractorKind, TextConfig
from ltx2_core.types import TextEmbeddings


class TextProjection(nn.Module):
    def __init__(self, config: TextConfig, hidden_size: int, num_hidden_states: int) -> None:
        """hidden_size / num_hidden_states: Gemma's D and L (layers + 1); features = D·L (188160 for Gemma 3 12B)."""
        super().__init__()
        self.config = config
        features = hidden_size * num_hidden_states
        if config.kind is FeatureExtractorKind.MEAN_RANGE:
            self.feature_extractor: nn.Module = MeanRangeFeatures(features, config.video.width)
        else:
            self.feature_extractor = PerTokenRmsFeatures(features, hidden_size, config.video.width, config.audio.width)
        self.video_connector = EmbeddingsConnector(config.video)
        self.audio_connector = EmbeddingsConnector(config.audio)

    def forward(self, hidden_states: Sequence[torch.Tensor], attention_mask: torch.Tensor) -> TextEmbeddings:
        """hidden_states: L tensors (B, T, D) (embeddings first, final-norm output last); attention_mask (B, T)."""
        video, audio = self.feature_extractor(hidden_states, attention_mask)
        return TextEmbeddings(self.video_connector(video, attention_mask), self.audio_connector(audio, attention_mask))
