"""The GPU suite's `cache` section: step caching (ltx2_core.sampling.cache, ComfyUI's EasyCache decisions) against
every step run, over a whole stage at the release's steps and guidance (four passes batched), at 768×512×121 and
384×256×121 on a GPU (the tiny structure at 96×64×9 under --quick), for each structure of --versions.

Per size up to three sides, each one timed run of the whole stage after a two-step warm-up: `full` (no cache),
`easycache` (EasyCache's default threshold 0.2; --quick: 1.0 so the tiny model skips), and `replay` (the
schedule-decided variant given easycache's skipped steps: the same result, no host read; on a GPU at 384×256×121
only, the host-bound size where a read per step could show). On a GPU one structure (2.3 where --versions has it):
about 2.5 minutes, estimated from the `step` section's 1.6 s per guided step at 768×512×121. Each row: the steps
skipped, the transformer forwards run and saved, the host reads, the stage's ms and ms per step, the speed-up over
`full`, and the final video and audio latents' relative L2 difference from `full`'s.
The weights are random (`suite_models.random_transformer`): how many steps a trained model skips is not measured
here (bench/native_swap.py with a released checkpoint and EasyCache does); what is, is the time per step of each
side and what a skipped step saves.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ltx2_core.sampling import denoise, ltx2_sigmas
from ltx2_core.sampling.cache import CachedPasses, CacheSettings
from ltx2_core.sampling.guidance import default_steps
from suite_measure import synchronize
from suite_models import clip, random_transformer, suite_config
from suite_sections import _free, _guided

Row = dict[str, Any]
SIZES = ((121, 512, 768), (121, 256, 384))
QUICK_SIZES = ((9, 64, 96),)


@torch.no_grad()
def cache_rows(s) -> list[Row]:
    """Three rows (full, easycache, replay) per structure and size; `s` is the suite's Settings."""
    rows = []
    for version in _versions(s):
        config = suite_config(version, s.full_layers, s.quick)
        model = random_transformer(config, s.device, s.dtype)
        for size in QUICK_SIZES if s.quick else SIZES:
            rows += _rows(s, model, size, replay=s.quick or size == SIZES[-1])
        del model
        _free(s.device)
    return rows


def _versions(s) -> tuple[str, ...]:
    """Every structure under --quick; on a GPU one (2.3 where asked, else the first): a stage at the release's steps
    is minutes, and what a skipped step saves is the same kind of figure for each structure."""
    if s.quick:
        return s.versions
    return ("2.3",) if "2.3" in s.versions else s.versions[:1]


def _rows(s, model, size: tuple[int, int, int], replay: bool) -> list[Row]:
    config = model.config
    steps = 8 if s.quick else default_steps(config.version)
    c = clip(config, size, s.text_tokens, s.device, s.dtype)
    step = _guided(model, c, steps)
    grid = ((size[0] - 1) // 8 + 1, size[1] // 32, size[2] // 32)
    cpu_sigmas = ltx2_sigmas(steps)
    denoise(step.setup, step.video, step.audio, step.sigmas[-3:])  # warm-up: two steps
    threshold = 1.0 if s.quick else CacheSettings().reuse_threshold
    base = {"version": config.version.value, "size": "×".join(map(str, size[::-1])), "steps": steps,
            "passes": len(step.setup.runner.passes)}
    full, full_ms = _timed(s, lambda: denoise(step.setup, step.video, step.audio, step.sigmas))
    rows = [base | {"side": "full", "threshold": None, "skipped": 0, "forwards": steps, "forwards_saved": 0,
                    "host_reads": 0, "ms": full_ms, "ms_per_step": full_ms / steps, "speedup": 1.0}]
    skipped: tuple[int, ...] = ()
    sides = (("easycache", CacheSettings(reuse_threshold=threshold)), ("replay", None))[: 2 if replay else 1]
    for side, settings in sides:
        settings = settings or CacheSettings(skip_steps=skipped)
        runner = CachedPasses(step.setup.runner, settings, cpu_sigmas, grid)
        setup = step.setup._replace(runner=runner)
        out, ms = _timed(s, lambda setup=setup: denoise(setup, step.video, step.audio, step.sigmas))
        record = runner.record()
        skipped = record.skipped
        rows.append(base | {"side": side, "threshold": threshold if side == "easycache" else None,
                            "skipped": len(record.skipped), "forwards": steps - record.forwards_saved,
                            "forwards_saved": record.forwards_saved, "host_reads": record.host_reads, "ms": ms,
                            "ms_per_step": ms / steps, "speedup": full_ms / ms,
                            "video_rel_diff": _relative(out[0].latent, full[0].latent),
                            "audio_rel_diff": _relative(out[1].latent, full[1].latent)})
    return rows


def _timed(s, fn):
    synchronize(s.device)
    start = time.perf_counter()
    out = fn()
    synchronize(s.device)
    return out, (time.perf_counter() - start) * 1e3


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()
