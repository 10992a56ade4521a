"""The command line's prompt encoder under torchrun, loaded by its text layout (issue 38, item 2): the layout is planned
from the text encoder files' headers (`memory.text_file_bytes`) and each rank's room, gathered, once the other
models are loaded and before Gemma is; then each rank reads only what the layout gives it:

* "pipeline": its layers (rank 0 also the token embeddings, the last rank the final norm and the projection), the
  rest never read (left on `meta`, `loader.text_parts`), so the peak at load is the rank's share, not the whole;
* "prompts" (and "one"): the whole encoder on every rank, as each encodes a prompt of its own;
* a run whose prompts rank 0 alone encodes and broadcasts (prompt enhancement samples text with the whole model;
  DFR's one prompt): the whole encoder on rank 0 only, none elsewhere;
* HDR (every rank runs it whole, encoding its own prompt): the whole encoder on every rank (the command line refuses
  --hdr under torchrun before anything loads: `cli_checks.check_hdr_early`).

`parallel.auto_length` loads the encoder the same way for `--frames auto`'s early encoding.

The demo model (no files) is built whole in code: its layout is planned from the loaded encoder, as before.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ltx2_core.loader.text_parts import TextPart
from ltx2_core.memory.sizes import device_room, ram_bytes
from ltx2_core.memory.text_file_bytes import skeleton_bytes, text_skeleton
from ltx2_core.memory.text_layout import GB, TextBytes, TextLayout, plan_text, stage_bytes
from ltx2_core.model.text import PromptEncoder
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel.gemma_pipeline import allowed_cuts
from ltx2_core.parallel.text_encode import SpreadEncoder, spread_prompts, text_bytes
from ltx2_core.pipeline import Distribution, Models
from ltx2_core.request import Request

ALONE = "text encoder: rank 0 encodes the prompts (it alone loads the text encoder)"


def part_for(layout: TextLayout, rank: int) -> TextPart | None:
    """What `rank` loads of the encoder under `layout`: its range of a pipeline, else None (the whole)."""
    if layout.mode != "pipeline":
        return None
    start, end = layout.bounds[rank]
    return TextPart(start, end, rank == 0, rank == len(layout.bounds) - 1)


def free_room(device: torch.device | str) -> int:
    """What the encoder may take on `device` now (nothing of it loaded yet): the GPU's free memory, or the RAM."""
    device = torch.device(device)
    return device_room(device) if device.type == "cuda" else ram_bytes() or 0


def plan_from_files(skeleton: PromptEncoder, device: torch.device | str, group: dist.ProcessGroup | None = None,
                    budget: int | None = None) -> TextLayout:
    """The layout every rank agrees on, from an encoder with no weight read (`text_skeleton`): each rank's room (or
    `budget` bytes) gathered, then planned for two prompts, as `text_encode.plan_for` plans a loaded one."""
    rooms: list[int | None] = [None] * dist.get_world_size(group)
    dist.all_gather_object(rooms, budget if budget is not None else free_room(device), group=group)
    return plan_text(skeleton_bytes(skeleton), rooms, 2, allowed_cuts(skeleton.gemma))


def encodes_alone(request: Request) -> bool:
    """Whether rank 0 alone encodes (and broadcasts) the prompts: enhancement, or DFR's one prompt."""
    return request.enhance_prompt or request.mode == "dfr"


def load_text(request: Request, files: ModelFiles, models: Models, distribution: Distribution,
              device: torch.device | str, dtype: torch.dtype | None = None, group: dist.ProcessGroup | None = None,
              budget: int | None = None) -> tuple[Models, Distribution, str]:
    """The command line's hook under torchrun: (models with this rank's prompt encoder, the distribution, the line
    saying the layout). `models.prompt_encoder` None: loaded here by the layout (module docstring); else (the demo)
    spread as loaded. `budget`: the bytes the encoder may take on each rank instead of the free memory. Collective."""
    if models.prompt_encoder is not None:
        return _spread_loaded(request, models, distribution, group, budget)
    if request.mode == "hdr":
        return models._replace(prompt_encoder=files.load_encoder(device, dtype)), distribution, ""
    if encodes_alone(request):
        encoder = files.load_encoder(device, dtype) if dist.get_rank() == 0 else None
        return models._replace(prompt_encoder=encoder), distribution, ALONE
    spread = load_spread(files, device, dtype, group, budget)
    return (models._replace(prompt_encoder=spread), distribution._replace(prompts=lambda encode_here: encode_here()),
            spread.layout.describe())


def load_spread(files: ModelFiles, device: torch.device | str, dtype: torch.dtype | None = None,
                group: dist.ProcessGroup | None = None, budget: int | None = None) -> SpreadEncoder:
    """The encoder of `files` spread over `group` by the layout planned from its headers and each rank's room (or
    `budget`), this rank reading only its part (a pipeline rank prints what it read); MemoryPlanError on every rank
    where no layout fits. Collective."""
    resolved = files.resolved()
    skeleton = text_skeleton(resolved.text_encoder, resolved.sources(), dtype=dtype)
    layout = plan_from_files(skeleton, device, group, budget)
    rank = dist.get_rank(group)
    part = part_for(layout, rank)
    encoder = files.load_encoder(device, dtype, part)
    if part is not None:
        print(_read_line(rank, part, text_bytes(encoder).whole, skeleton_bytes(skeleton)), flush=True)
    return SpreadEncoder(encoder, layout, group)


def _read_line(rank: int, part: TextPart, read: int, sizes: TextBytes) -> str:
    """What a pipeline rank read of the text encoder, beside its planned weights and the whole encoder's."""
    planned = stage_bytes(sizes, part.start, part.end, part.head, prompts=0)
    extra = (" + embeddings" if part.embeddings else "") + (" + norm and projection" if part.head else "")
    return (f"text encoder on rank {rank}: layers {part.start}-{part.end - 1}{extra} read, {read} bytes "
            f"({read / GB:.2f} GB; planned {planned}, the whole encoder {sizes.whole})")


def _spread_loaded(request: Request, models: Models, distribution: Distribution, group: dist.ProcessGroup | None,
                   budget: int | None) -> tuple[Models, Distribution, str]:
    """An encoder loaded whole on every rank (the demo's) spread by the layout planned from it (`spread_prompts`)."""
    if encodes_alone(request) or request.mode == "hdr":
        return models, distribution, ""
    models, distribution = spread_prompts(models, distribution, group, budget)
    return models, distribution, models.prompt_encoder.layout.describe()
