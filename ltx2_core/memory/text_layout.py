"""How a multi-rank run encodes its prompts (issue 38, item 2): which way the text encoder (Gemma + the text
projection) fits the ranks' devices, decided from byte counts before any prompt is encoded.

* "prompts": every rank holds the whole encoder and encodes its share of the prompts (positive on one rank,
  negative on another), then the contexts are exchanged: the encoding time of one prompt instead of two;
* "pipeline": Gemma's layers split into contiguous ranges, rank r holding layers [a_r, b_r) (rank 0 also the token
  embeddings, the last rank the final norm and the projection), the hidden states passed on: a rank holds about
  1/N of Gemma's weights, the encoding takes as long as on one device;
* "one": a single rank (one rank, or one prompt) encodes, as before.
A replica that fits is preferred (it is faster and needs no cut); a pipeline is cut where the largest per-rank share
of the free memory is smallest; when neither fits, `MemoryPlanError` names the fix.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal, NamedTuple

from ltx2_core.memory.plan import MemoryPlanError

GB = 1024**3
Mode = Literal["one", "prompts", "pipeline"]


class TextBytes(NamedTuple):
    """The encoder's bytes: each Gemma layer's weights, the token embeddings (rank 0 of a pipeline), the final norm
    and projection (its last rank), and one hidden state of one prompt (B=1, T, D) for the activations."""

    layers: tuple[int, ...]
    embeddings: int
    head: int
    state: int

    @property
    def whole(self) -> int:
        return sum(self.layers) + self.embeddings + self.head


class TextLayout(NamedTuple):
    """The choice: `mode`, and for a pipeline each rank's layer range [a, b) and its bytes (weights + states)."""

    mode: Mode
    bounds: tuple[tuple[int, int], ...] = ()
    rank_bytes: tuple[int, ...] = ()

    def describe(self) -> str:
        if self.mode != "pipeline":
            return {"one": "text encoder: one rank encodes the prompts",
                    "prompts": "text encoder: a whole replica per rank, the prompts encoded on different ranks"}[
                self.mode]
        spans = ", ".join(f"rank {r}: layers {a}-{b - 1} ({n / GB:.1f} GB)"
                          for r, ((a, b), n) in enumerate(zip(self.bounds, self.rank_bytes)))
        return f"text encoder: Gemma's layers as a pipeline over {len(self.bounds)} ranks ({spans})"


def replica_bytes(sizes: TextBytes, prompts: int) -> int:
    """A whole encoder with `prompts` prompts in flight: weights + every layer's hidden states (kept for the
    projection)."""
    return sizes.whole + prompts * (len(sizes.layers) + 1) * sizes.state


def stage_bytes(sizes: TextBytes, a: int, b: int, last: bool, prompts: int) -> int:
    """Rank bytes of layers [a, b): their weights and states, the embeddings on the first rank, and on the last the
    head and every state (gathered there for the projection)."""
    weights = sum(sizes.layers[a:b]) + (sizes.embeddings if a == 0 else 0) + (sizes.head if last else 0)
    states = (len(sizes.layers) + 1 if last else b - a + (a == 0)) * prompts * sizes.state
    return weights + states


def pipeline_bounds(sizes: TextBytes, free: Sequence[int], prompts: int, cuts: Collection[int] | None = None
                    ) -> tuple[tuple[int, int], ...] | None:
    """Contiguous ranges, one per rank (each at least one layer, cut only at `cuts`, None: anywhere) minimising the
    largest bytes/free ratio; None when there are fewer allowed ranges than ranks or a rank cannot fit."""
    layers, ranks = len(sizes.layers), len(free)
    allowed = set(range(1, layers)) if cuts is None else set(cuts) & set(range(1, layers))
    best: dict[tuple[int, int], tuple[float, tuple[int, ...]]] = {(0, 0): (0.0, ())}  # (ranks, layers) -> (ratio, cuts)
    for rank in range(ranks):
        last = rank == ranks - 1
        ends = [layers] if last else sorted(allowed)
        for (done, start), (ratio, made) in [(k, v) for k, v in best.items() if k[0] == rank]:
            for end in (e for e in ends if e > start):
                need = stage_bytes(sizes, start, end, last, prompts) / max(free[rank], 1)
                key, value = (rank + 1, end), (max(ratio, need), made + (end,))
                if key not in best or value[0] < best[key][0]:
                    best[key] = value
    found = best.get((ranks, layers))
    if found is None or found[0] > 1.0:
        return None
    edges = (0, *found[1])
    return tuple(zip(edges[:-1], edges[1:]))


def plan_text(sizes: TextBytes, free: Sequence[int], prompts: int, cuts: Collection[int] | None = None
              ) -> TextLayout:
    """The layout for `len(free)` ranks with `free[r]` bytes each (what the encoder may take there) and `prompts`
    prompts (1 or 2); `cuts`: the layer indices a pipeline may start a rank at (None: any)."""
    ranks = len(free)
    if replica_bytes(sizes, 1) <= min(free):
        return TextLayout("prompts" if ranks > 1 and prompts > 1 else "one")
    bounds = pipeline_bounds(sizes, free, prompts, cuts) if ranks > 1 else None
    if bounds is not None:
        return TextLayout("pipeline", bounds, tuple(stage_bytes(sizes, a, b, r == ranks - 1, prompts)
                                                    for r, (a, b) in enumerate(bounds)))
    raise MemoryPlanError(_refusal(sizes, free, prompts, cuts))


def _refusal(sizes: TextBytes, free: Sequence[int], prompts: int, cuts: Collection[int] | None) -> str:
    """Names what is short and the smallest number of such devices a pipeline would fit."""
    ranks, least = len(free), min(free)
    if ranks > len(sizes.layers):
        return (f"the text encoder does not fit one rank whole, and a pipeline of its {len(sizes.layers)} layers "
                f"cannot span {ranks} ranks (one layer each at least); free memory on the devices")
    fitting = next((n for n in range(ranks + 1, len(sizes.layers) + 1)
                    if pipeline_bounds(sizes, [least] * n, prompts, cuts) is not None), None)
    more = (f"launch at least {fitting} ranks (torchrun --nproc-per-node {fitting}) so Gemma's layers split further"
            if fitting else "no number of such devices holds the text encoder's largest layer")
    return (f"the text encoder ({sizes.whole / GB:.1f} GB, {len(sizes.layers)} layers) fits neither whole nor as a "
            f"pipeline over {ranks} rank(s) with {least / GB:.1f} GB free on the smallest: {more}, free memory on the "
            "devices, or load the weights in bfloat16 (--dtype bfloat16) if they are float32")
