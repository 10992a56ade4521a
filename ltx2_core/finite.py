"""NaN and infinity never become a silent video: one check at the end of each stage names the likely causes.

A check reads one boolean back to the host (a sync), so it runs once per stage (after the prompts are encoded,
after the last step of each denoising stage, after decoding), never inside a step; the error comes before anything
later runs and before any file is written.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ltx2_core.errors import NonFiniteError

PROMPT_CAUSES = (
    "the text encoder file (Gemma 3) or the checkpoint's text projection holds NaN/inf weights (a damaged download: "
    "download it again), or Gemma ran in float16 and overflowed (run it in bfloat16 or float32)"
)
SAMPLING_CAUSES = (
    "the checkpoint holds NaN/inf weights (a damaged download or a broken merge: download it again), a LoRA holds "
    "NaN/inf values or has a strength far too large, or a float16 run overflowed (use bfloat16 or float32)"
)
DECODING_CAUSES = (
    "the checkpoint's video VAE, audio VAE or vocoder weights hold NaN/inf (download it again), or the decoders ran "
    "in float16 and overflowed (decode in bfloat16 or float32)"
)


PIECE = 1 << 24  # values checked at once: torch.isfinite holds 7 bytes a float32 value (its absolute value, 3 masks)


def all_finite(tensor: torch.Tensor) -> torch.Tensor:
    """0-d bool on the tensor's device: no NaN or infinity in `tensor`, checked a piece (views along its longest
    axis, at most about PIECE values each) at a time, so a decoded video's check holds ~100 MB rather than 7 bytes a
    value. No host read."""
    if tensor.numel() <= PIECE:
        return torch.isfinite(tensor).all()
    axis = max(range(tensor.dim()), key=lambda d: tensor.shape[d])
    step = max(1, PIECE * tensor.shape[axis] // tensor.numel())
    return torch.stack([torch.isfinite(piece).all() for piece in tensor.split(step, dim=axis)]).all()


def check_finite(stage: str, tensors: Mapping[str, torch.Tensor], causes: str, consequence: str) -> None:
    """Raises NonFiniteError naming the stage, the tensors with NaN/inf, `causes` and `consequence` (what did not
    happen). The tensors must share a device; one host read for all of them."""
    finite = torch.stack([all_finite(t) for t in tensors.values()])
    if bool(finite.all()):
        return
    bad = [name for name, ok in zip(tensors, finite.tolist()) if not ok]
    raise NonFiniteError(f"{stage}: the {' and the '.join(bad)} hold NaN or infinite values. Likely causes: "
                         f"{causes}. {consequence}")
