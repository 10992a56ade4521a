"""Our transformer vs the reference `ltx_core` LTXModel: same tiny config, same random weights, fp32.

Tolerance atol=rtol=1e-5: both sides run the same fp32 operations; what differs is only the association order of
a few elementwise ops (RoPE, modulation), measured at ~2e-6 on outputs of magnitude ~10.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.model.transformer import BatchPerturbations, to_x0
from ltx2_core.types import PassPerturbation, StreamInput
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from support.reference import import_ltx_core, reference_transformer

TOL = dict(atol=1e-5, rtol=1e-5)
FRAMES, ROWS, COLS, AUDIO_TOKENS, TEXT_TOKENS = 3, 2, 3, 17, 8
STG_BLOCK = 1


@pytest.fixture(scope="module", params=["2.0", "2.3", "2.0-interleaved-fp32-freqs"])
def models(request):
    """Both released structures, plus the reference's code-default RoPE (interleaved, fp32 frequency grid)."""
    version, _, variant = request.param.partition("-")
    config = TransformerConfig.tiny(version)
    if variant:
        config = dataclasses.replace(config, rope_type="interleaved", rope_float64=False)
    ours = demo_transformer(config, seed=1)
    ref = reference_transformer({k: v.clone() for k, v in ours.state_dict().items()}, config.to_metadata())
    return ours, ref


def _contexts(config: TransformerConfig, batch: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    video_width = config.caption_channels or config.video.context_dim
    audio_width = config.caption_channels or config.audio.context_dim
    return (torch.randn(batch, TEXT_TOKENS, video_width, generator=g),
            torch.randn(batch, TEXT_TOKENS, audio_width, generator=g))


def _latents(batch: int, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, FRAMES * ROWS * COLS, 128, generator=g),
            torch.randn(batch, AUDIO_TOKENS, 128, generator=g))


def _ours(model, vlat, alat, vctx, actx, sigma, video_t, perturbations=None):
    run = model.prepare_run(video_positions(FRAMES, ROWS, COLS, 24.0), audio_positions(AUDIO_TOKENS), vctx, actx)
    video = StreamInput(vlat, sigma, video_t)
    audio = StreamInput(alat, sigma, sigma[:, None])
    return model(video, audio, run, perturbations)


def _ref(ref, vlat, alat, vctx, actx, sigma, video_t, perturbation=None):
    import_ltx_core()
    from ltx_core.guidance.perturbations import BatchedPerturbationConfig
    from ltx_core.model.transformer import Modality

    b = vlat.shape[0]
    vpos = video_positions(FRAMES, ROWS, COLS, 24.0).expand(b, -1, -1, -1)
    apos = audio_positions(AUDIO_TOKENS).expand(b, -1, -1, -1)
    video = Modality(vlat, sigma, video_t.expand(b, vlat.shape[1]).unsqueeze(-1), vpos, vctx)
    audio = Modality(alat, sigma, sigma[:, None, None].expand(b, alat.shape[1], 1), apos, actx)
    pert = BatchedPerturbationConfig([perturbation] * b) if perturbation else BatchedPerturbationConfig.empty(b)
    return ref(video, audio, pert)


def _ref_perturbation(kind: str):
    from ltx_core.guidance.perturbations import Perturbation, PerturbationConfig, PerturbationType as T

    if kind == "stg":
        return PerturbationConfig([Perturbation(T.SKIP_VIDEO_SELF_ATTN, [STG_BLOCK]),
                                   Perturbation(T.SKIP_AUDIO_SELF_ATTN, [STG_BLOCK])])
    return PerturbationConfig([Perturbation(T.SKIP_A2V_CROSS_ATTN, None), Perturbation(T.SKIP_V2A_CROSS_ATTN, None)])


def _assert_pair(got, want):
    torch.testing.assert_close(got[0], want[0], **TOL)
    torch.testing.assert_close(got[1], want[1], **TOL)


def test_uniform_sigma(models):
    ours, ref = models
    vlat, alat = _latents(1)
    vctx, actx = _contexts(ours.config, 1, 4)
    sigma = torch.tensor([0.7])
    _assert_pair(_ours(ours, vlat, alat, vctx, actx, sigma, sigma[:, None]),
                 _ref(ref, vlat, alat, vctx, actx, sigma, sigma[:, None]))


def test_per_token_timesteps_first_frame_conditioned(models):
    ours, ref = models
    vlat, alat = _latents(1)
    vctx, actx = _contexts(ours.config, 1, 4)
    sigma = torch.tensor([0.6])
    video_t = torch.full((1, FRAMES * ROWS * COLS), 0.6)
    video_t[:, : ROWS * COLS] = 0.0  # first latent frame is the conditioning image: timestep 0
    got = _ours(ours, vlat, alat, vctx, actx, sigma, video_t)
    _assert_pair(got, _ref(ref, vlat, alat, vctx, actx, sigma, video_t))
    # x0 conversion per token, against the reference X0Model
    from ltx_core.model.transformer import X0Model

    ref_x0 = _ref(X0Model(ref), vlat, alat, vctx, actx, sigma, video_t)
    torch.testing.assert_close(to_x0(vlat, got[0], video_t), ref_x0[0], **TOL)
    torch.testing.assert_close(to_x0(alat, got[1], sigma[:, None]), ref_x0[1], **TOL)


def test_batch_of_two_with_different_sigmas(models):
    ours, ref = models
    vlat, alat = _latents(2)
    vctx, actx = _contexts(ours.config, 2, 5)
    sigma = torch.tensor([0.9, 0.25])
    _assert_pair(_ours(ours, vlat, alat, vctx, actx, sigma, sigma[:, None]),
                 _ref(ref, vlat, alat, vctx, actx, sigma, sigma[:, None]))


@pytest.mark.parametrize("kind", ["stg", "isolated"])
def test_single_perturbed_pass(models, kind):
    ours, ref = models
    vlat, alat = _latents(1)
    vctx, actx = _contexts(ours.config, 1, 4)
    sigma = torch.tensor([0.5])
    spec = PassPerturbation.stg([STG_BLOCK], [STG_BLOCK]) if kind == "stg" else PassPerturbation.isolated()
    pert = BatchPerturbations([spec], ours.config.num_layers, "cpu", torch.float32)
    got = _ours(ours, vlat, alat, vctx, actx, sigma, sigma[:, None], pert)
    import_ltx_core()
    want = _ref(ref, vlat, alat, vctx, actx, sigma, sigma[:, None], _ref_perturbation(kind))
    _assert_pair(got, want)
    plain = _ours(ours, vlat, alat, vctx, actx, sigma, sigma[:, None])
    assert (got[0] - plain[0]).abs().max() > 1e-3, "the perturbation must change the output"


def test_batched_guidance_passes_equal_separate_reference_passes(models):
    """[cond, uncond, STG, isolated] as ONE forward of batch 4 == four separate B=1 reference passes."""
    ours, ref = models
    vlat, alat = _latents(1)
    pos_v, pos_a = _contexts(ours.config, 1, 4)
    neg_v, neg_a = _contexts(ours.config, 1, 6)
    sigma = torch.tensor([0.8])
    passes = [PassPerturbation(), PassPerturbation(), PassPerturbation.stg([STG_BLOCK], [STG_BLOCK]),
              PassPerturbation.isolated()]
    pert = BatchPerturbations(passes, ours.config.num_layers, "cpu", torch.float32)
    sigma4 = sigma.expand(4)
    got = _ours(ours, vlat.expand(4, -1, -1), alat.expand(4, -1, -1), torch.cat([pos_v, neg_v, pos_v, pos_v]),
                torch.cat([pos_a, neg_a, pos_a, pos_a]), sigma4, sigma4[:, None], pert)
    import_ltx_core()
    separate = [
        _ref(ref, vlat, alat, pos_v, pos_a, sigma, sigma[:, None]),
        _ref(ref, vlat, alat, neg_v, neg_a, sigma, sigma[:, None]),
        _ref(ref, vlat, alat, pos_v, pos_a, sigma, sigma[:, None], _ref_perturbation("stg")),
        _ref(ref, vlat, alat, pos_v, pos_a, sigma, sigma[:, None], _ref_perturbation("isolated")),
    ]
    for i, want in enumerate(separate):
        _assert_pair((got[0][i : i + 1], got[1][i : i + 1]), want)
