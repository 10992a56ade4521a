"""The LTX-2 audio+video diffusion transformer."""

from ltx2_core.model.transformer.model import LTX2Transformer, to_x0
from ltx2_core.model.transformer.perturbations import BatchPerturbations, Skip

__all__ = ["BatchPerturbations", "LTX2Transformer", "Skip", "to_x0"]
