"""The text path: Gemma 3 and Gemma 4 prompt encoding, feature extractors and embeddings connectors."""

from ltx2_core.model.text.connector import EmbeddingsConnector
from ltx2_core.model.text.encoder import PromptEncoder
from ltx2_core.model.text.features import MeanRangeFeatures, PerTokenRmsFeatures
from ltx2_core.model.text.projection import TextProjection
from ltx2_core.model.text.tokenizer import PromptTokenizer, TokenBatch

__all__ = [
    "EmbeddingsConnector",
    "MeanRangeFeatures",
    "PerTokenRmsFeatures",
    "PromptEncoder",
    "PromptTokenizer",
    "TextProjection",
    "TokenBatch",
]
