"""LTX-2 SamplerCustomAdvanced (fast) on a MODEL patched by ComfyUI's EasyCache node (its holder in
transformer_options["easycache"], its wrappers under the "easycache" key, built here as ComfyUI 0.26.0 builds them,
duck-typed): the node caches as our sampler does with the holder's settings, the window made σ by the MODEL's own
model sampling; LazyCache is refused naming EasyCache. ComfyUI's real EasyCache side by side: tests/e2e."""

from __future__ import annotations

import logging
import types

import pytest
import torch

from ltx2_core import GuidanceParams
from ltx2_core.hosts import LocalHost
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.cache import CacheSettings, percent_to_sigma
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent
from nodes.interop import split, to_comfy
from nodes.native_sampler import LTX2SamplerCustomAdvanced

from .test_native_sampler import (
    CFGGuider,
    Noise_RandomNoise,
    cond,
    ksampler,
    native_model,
    patcher,
    prompts,
    sample_euler,
)

SIGMAS = ltx2_sigmas(12)


class EasyCacheHolder:  # ComfyUI's class name and the attributes the node reads
    def __init__(self, reuse_threshold, start_percent=0.15, end_percent=0.95):
        self.reuse_threshold, self.start_percent, self.end_percent = reuse_threshold, start_percent, end_percent
        self.subsample_factor = 8


class LazyCacheHolder(EasyCacheHolder):
    pass


def _patched(model, holder, key: str = "easycache"):
    wrappers = {kind: {key: [lambda executor, *a, **k: executor(*a, **k)]}
                for kind in ("outer_sample", "calc_cond_batch", "diffusion_model")}
    options = {"transformer_options": {"easycache": holder, "wrappers": wrappers}}
    found = patcher(model, options)
    sampling = types.SimpleNamespace(percent_to_sigma=percent_to_sigma)  # LTX-2's ModelSamplingFlux, shift 2.37
    found.get_model_object = lambda name: {"model_sampling": sampling}[name]
    return found


def test_an_easycache_model_is_cached_as_our_sampler_caches(caplog):
    model = native_model()
    positive, negative = prompts()
    latent = empty_latent(96, 64, 9, 24.0)
    guider = CFGGuider(_patched(model, EasyCacheHolder(1.0)), cond(positive, frame_rate=24.0),
                       cond(negative, frame_rate=24.0), 3.0)
    with caplog.at_level(logging.INFO, logger="ltx2_core.sampling.cache"):
        out, _ = LTX2SamplerCustomAdvanced().sample(Noise_RandomNoise(11), guider, ksampler(sample_euler), SIGMAS,
                                                    dict(to_comfy(latent)))
    (line,) = [r.getMessage() for r in caplog.records if "EasyCache" in r.getMessage()]
    records = []
    stage = Stage(SIGMAS, video_guidance=GuidanceParams(cfg=3.0), audio_guidance=GuidanceParams(cfg=3.0),
                  cache=CacheSettings(reuse_threshold=1.0, report=records.append))
    with LocalHost(model, "cpu", torch.float32).sampler() as (run, _):
        expected = run(positive, negative, latent, stage, torch.Generator().manual_seed(11))
    (record,) = records
    assert 0 < len(record.skipped) < 8  # the threshold skips some steps and runs others
    assert f"skipped {len(record.skipped)}/12 steps" in line and str(list(record.skipped)) in line
    video, audio = split(out)
    torch.testing.assert_close(video, expected.video, rtol=0, atol=1e-5)
    torch.testing.assert_close(audio, expected.audio, rtol=0, atol=1e-5)


def test_lazycache_is_refused_naming_easycache():
    model = native_model()
    positive, negative = prompts()
    for holder, key in ((LazyCacheHolder(0.2), "lazycache"), (None, "lazycache")):
        guider = CFGGuider(_patched(model, holder, key), cond(positive), cond(negative), 1.0)
        with pytest.raises(ValueError, match="LazyCache.*EasyCache"):
            LTX2SamplerCustomAdvanced().sample(Noise_RandomNoise(1), guider, ksampler(sample_euler), SIGMAS,
                                               dict(to_comfy(empty_latent(64, 64, 9, 24.0))))


def test_our_sampler_node_takes_the_step_cache_node(loaded, caplog):
    """LTX-2 Step Cache -> LTX-2 Sampler's optional `cache` (the last input, so saved workflows keep their links):
    the stage is cached (our log line) and stays near the uncached one; with cuda_graphs it is refused."""
    from support.node_calls import node

    from nodes import LTX2Sampler

    model, _, conditioning, guidance = loaded
    (cache,) = node("LTX2StepCache", 1.0, 0.15, 0.95)
    assert cache == CacheSettings(reuse_threshold=1.0)
    # appended in the order they came (saved workflows keep their widget values): the cache, then the sampler
    assert list(LTX2Sampler.INPUT_TYPES()["optional"])[-2:] == ["cache", "sampler"]
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    (plain,) = node("LTX2Sampler", model, conditioning, latent, 4, 12, "ltx2", guidance=guidance)
    with caplog.at_level(logging.INFO, logger="ltx2_core.sampling.cache"):
        (cached,) = node("LTX2Sampler", model, conditioning, latent, 4, 12, "ltx2", guidance=guidance, cache=cache)
    (line,) = [r.getMessage() for r in caplog.records if "EasyCache" in r.getMessage()]
    skipped = int(line.split("skipped ")[1].split("/")[0])
    assert 0 < skipped < 8, line
    a, b = split(cached), split(plain)
    for ours, full in zip(a, b):
        error = ((ours - full).norm() / full.norm()).item()
        assert 1e-5 < error < 0.5, error  # changed by the skipped steps, not far off (tiny random model)
    with pytest.raises(ValueError, match="cuda_graphs"):
        node("LTX2Sampler", model, conditioning, latent, 4, 12, "ltx2", guidance=guidance, cuda_graphs=True,
             cache=cache)
