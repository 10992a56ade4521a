"""DFR (ltx-pipelines 1.2.0's `DFRPipeline`): a long clip from a keyframe-slot transformer, spatially detailed, with
optional temporal x2 rounds. What has landed so far: the checks a DFR request passes before any model work. The
chain of stages (stage 1 with slots, stage 2 detailing, the tiled temporal rounds and their stitch) is to come; its
pieces are `dfr_layout` (canvas, tiles, stitch), `conditioning.keyframe_slots`, `Stage.ancestral_eta` and the
temporal upsampler (`model.upsampler`, `ModelFiles.temporal_upsampler`)."""

from __future__ import annotations

from ltx2_core.conditioning.keyframe_slots import require_keyframe_embedding
from ltx2_core.dfr_layout import canvas
from ltx2_core.model.transformer.config import TransformerConfig

MAX_ROUNDS = 2  # each round doubles the frame rate; 1.2.0 allows 0, 1 or 2
ANCHOR_STRENGTH = 0.95  # carried keyframes of a temporal round (1.2.0's _ANCHOR_KEYFRAME_STRENGTH)
ROUND_ETA = 0.5  # the rounds' ancestral eta (_TEMPORAL_ANCESTRAL_ETA)
MAX_CONDITIONING_FPS = 60.0  # the rounds' conditioning frame rate cap (_MAX_CONDITIONING_FPS)
ROUND_SEED_STEP = 1000  # a tile's ancestral seed: seed + 1000·round + tile


def check_dfr(frames: int, rounds: int, transformer: TransformerConfig, transformer_label: str,
              temporal_upsampler: str | None) -> tuple[int, int, list[int]]:
    """The canvas (padded frames, segment, slot frames) of a DFR request, or ValueError naming the fix: rounds
    outside 0..2, rounds without the temporal upsampler file, a transformer without the keyframe embedding, a frame
    count that is not 8k+1 (k >= 1). Headers only: called before any model loads."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"DFR's temporal rounds must be 0, 1 or 2 (each doubles the frame rate), got {rounds!r}")
    if rounds and temporal_upsampler is None:
        raise ValueError(f"{rounds} temporal round(s) need the temporal x2 latent upsampler: give it with "
                         "--temporal-upsampler (or put it in the models folder's latent_upscale_models), or run 0 "
                         "rounds")
    require_keyframe_embedding(transformer, transformer_label)
    return canvas(frames)
