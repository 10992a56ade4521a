"""`--frames auto` under torchrun (issue 38, item 2): the duration head's prompt encoded before the memory plan by
the text encoder spread over the ranks as the run's own (`text_load.load_spread`: the layout planned from the files'
headers and each rank's room, a pipeline rank reading only its layers), not loaded whole on every rank.

The duration head reads only the encoder's output contexts (`TextEmbeddings`, which the spread encoder gives every
rank as one device gives them), so rank 0 alone loads the head (a few MB) and broadcasts its seconds: every rank
then plans the same clip. A request whose rank 0 alone encodes (prompt enhancement samples text with the whole
model; DFR's one prompt) loads the encoder on rank 0 only, as the run's load does; where no layout fits the ranks
(MemoryPlanError on every rank alike) rank 0 alone loads it as one process does (streamed on a GPU).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ltx2_core.duration import predict_seconds
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel.text_load import encodes_alone, load_spread
from ltx2_core.request import Request
from ltx2_core.request_encoding import encode_request
from ltx2_core.types import TextEmbeddings


def predict_across(request: Request, files: ModelFiles, device: torch.device | str, dtype: torch.dtype | None = None,
                   group: dist.ProcessGroup | None = None, budget: int | None = None) -> float:
    """The duration head's seconds for `request`'s prompt (rank 0's, the same on every rank); the encoder and the
    head are freed before it returns. `budget`: the bytes the encoder may take on each rank. Collective."""
    config, rank = files.transformer_config(), dist.get_rank(group)
    positive = _encode_spread(request, files, device, dtype, group, budget)
    if rank != 0:
        seconds = None
    elif positive is not None:
        seconds = predict_seconds(files.load_duration_head(device), positive, request.audio_only)
    else:  # rank 0 alone, as one process
        encoder, head = files.load_text(device, dtype)
        seconds = predict_seconds(head, encode_request(request, encoder, config)[0], request.audio_only)
    shared = [seconds]
    dist.broadcast_object_list(shared, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    return float(shared[0])


def _encode_spread(request: Request, files: ModelFiles, device: torch.device | str, dtype: torch.dtype | None,
                   group: dist.ProcessGroup | None, budget: int | None) -> TextEmbeddings | None:
    """The positive prompt's contexts on every rank, encoded by the spread encoder (freed after); None on every rank
    where rank 0 alone encodes (enhancement, DFR) or no layout fits them. Collective."""
    if encodes_alone(request):
        return None
    try:
        encoder = load_spread(files, device, dtype, group, budget)
    except MemoryPlanError:
        return None  # every rank planned from the same gathered rooms: the same verdict everywhere
    return encode_request(request, encoder, files.transformer_config())[0]
