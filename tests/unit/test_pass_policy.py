"""Guidance passes per forward from the device's measured crossover (`memory.pass_policy`): batched below it, one
at a time from it on; devices not measured (and the CPU) keep every pass in one forward. The memory plan counts the
activations of the policy's batch where every block stays resident, and keeps the passes together where blocks
stream (one streamed copy of the weights then serves every pass). The sampler uses the policy when the user sets
nothing."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import video_tokens
from ltx2_core.memory import pass_policy
from ltx2_core.memory.pass_policy import CROSSOVER_TOKENS, policy_cap, policy_passes
from ltx2_core.memory.plan import GB, activation_bytes, plan_memory, transformer_weight_bytes
from ltx2_core import stage_samplers
from ltx2_core.sampling.stage import Stage
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.stages import empty_latent
from ltx2_core.types import TextEmbeddings
from support.configs import released_transformer_configs

H100 = (9, 0)
STAGE1, FULL = (121, 256, 384), (121, 512, 768)  # frames, height, width: 1,536 and 6,144 video tokens


def test_the_table_picks_batched_below_the_crossover_and_one_at_a_time_from_it():
    assert video_tokens(*STAGE1) == 1536 and video_tokens(*FULL) == 6144
    crossover = CROSSOVER_TOKENS[H100]
    assert 1536 < crossover <= 6144  # the measured points: batching wins at 1,536, loses at 6,144
    assert policy_passes(H100, 1536, 4) == 4 and policy_cap(H100, 1536) is None
    assert policy_passes(H100, 6144, 4) == 1 and policy_cap(H100, 6144) == 1
    assert policy_passes(H100, crossover - 1, 3) == 3 and policy_passes(H100, crossover, 3) == 1
    assert policy_passes(H100, 0, 2) == 2  # audio only: no video tokens
    assert policy_passes(None, 10**6, 4) == 4 and policy_cap(None, 10**6) is None  # the CPU
    assert policy_passes((8, 0), 10**6, 4) == 4  # a device not measured: as before any measurement
    assert policy_passes((8, 0), 500, 4, table={(8, 0): 500}) == 1  # a table passed in
    with pytest.raises(ValueError, match="at least 1"):
        policy_passes(H100, 100, 0)


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_the_plan_counts_the_activations_of_the_policys_batch(version):
    config = released_transformer_configs()[version]
    weights = transformer_weight_bytes(config)
    for size, want in ((STAGE1, 4), (FULL, 1)):
        plan = plan_memory(config, weights, 80 * 10**9, *size, 4, capability=H100)
        assert plan.streamed_blocks == 0 and plan.passes_per_forward == want, size
        assert plan.activations == activation_bytes(config, *size, want)
    # another device, or none measured: all four in one forward, as before
    assert plan_memory(config, weights, 80 * 10**9, *FULL, 4).passes_per_forward == 4
    assert plan_memory(config, weights, 80 * 10**9, *FULL, 4, capability=(8, 6)).passes_per_forward == 4
    # one pass at a time keeps a quarter of the batched activations (≈1.5 GiB less at 6,144 tokens, bf16)
    saved = activation_bytes(config, *FULL, 4) - activation_bytes(config, *FULL, 1)
    assert 0.5 * GB < saved < 8 * GB


def test_streamed_blocks_keep_the_passes_together_under_the_policy():
    config = released_transformer_configs()["2.3"]
    plan = plan_memory(config, transformer_weight_bytes(config), 24 * 10**9, *FULL, 4, capability=H100)
    assert plan.streamed_blocks > 0 and plan.passes_per_forward == 4


def _latent_and_sampled(monkeypatch, capability, **options):
    given = {}
    monkeypatch.setattr(stage_samplers, "device_capability", lambda device: capability)
    monkeypatch.setattr(stage_samplers, "sample", lambda *args, **kwargs: given.update(kwargs))
    model = demo_transformer(TransformerConfig.tiny("2.0", num_layers=1))
    sampler = stage_samplers.LocalSampler(model, **options)
    text = TextEmbeddings(torch.zeros(1, 2, 12), torch.zeros(1, 2, 12))
    for size in (STAGE1, FULL):
        sampler(text, None, empty_latent(size[2], size[1], size[0], 24.0), Stage(ltx2_sigmas(1)),
                torch.Generator())
        yield given["passes_per_forward"]


def test_the_sampler_takes_the_policy_per_stage_unless_the_user_sets_it(monkeypatch):
    assert list(_latent_and_sampled(monkeypatch, H100)) == [None, 1]  # stage 1 batched, full size one at a time
    assert list(_latent_and_sampled(monkeypatch, None)) == [None, None]
    assert list(_latent_and_sampled(monkeypatch, H100, passes_per_forward=2)) == [2, 2]
    # one rank of a parallel run (not measured): every pass in one forward, as before
    assert list(_latent_and_sampled(monkeypatch, H100, one_gpu=False)) == [None, None]
    assert pass_policy.device_capability("cpu") is None
