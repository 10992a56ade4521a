"""ltx2_core: Lightricks' LTX-2 / LTX-2.3 audio+video model, importable and usable without ComfyUI."""

from ltx2_core.config import ModelVersion, StreamConfig, TransformerConfig
from ltx2_core.model.transformer import BatchPerturbations, LTX2Transformer, to_x0
from ltx2_core.types import PassPerturbation, Rope, RunConstants, StreamInput

__all__ = [
    "BatchPerturbations",
    "LTX2Transformer",
    "ModelVersion",
    "PassPerturbation",
    "Rope",
    "RunConstants",
    "StreamConfig",
    "StreamInput",
    "TransformerConfig",
    "to_x0",
]
