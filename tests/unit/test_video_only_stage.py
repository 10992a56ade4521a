"""Video-only runs (`AVLatent.audio` None, the HDR IC-LoRA's): the transformer's video output without an audio stream
equals its video output beside one with every audio<->video cross-attention removed (the isolated pass: the video
then never sees the audio), and a captured step (`CudaGraphStep` with the CPU's `EagerReplay`) replays the eager
video-only run, Euler and ancestral, drawing the same noise."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.compile import CudaGraphStep, EagerReplay
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.model.transformer.perturbations import BatchPerturbations
from ltx2_core.sampling import DISTILLED_SIGMAS, denoise, guided_setup, noised_state, sigma_table
from ltx2_core.sampling.denoise import AncestralStep
from ltx2_core.types import PassPerturbation, StreamInput, TextEmbeddings


@pytest.mark.parametrize("version", ["2.0", "2.5"])
def test_the_video_alone_equals_the_video_isolated_from_the_audio(version):
    model = demo_transformer(TransformerConfig.tiny(version, num_layers=3), seed=2)
    g = torch.Generator().manual_seed(1)
    config = model.config
    widths = (config.caption_channels,) * 2 if config.caption_channels else (config.video.context_dim,
                                                                               config.audio.context_dim)
    vctx, actx = (torch.randn(1, 5, width, generator=g) for width in widths)
    vpos, apos = video_positions(2, 2, 3, 24.0), audio_positions(9)
    video = StreamInput(torch.randn(1, 12, 128, generator=g), torch.tensor([0.7]), torch.full((1, 12), 0.7))
    audio = StreamInput(torch.randn(1, 9, 128, generator=g), torch.tensor([0.4]), torch.full((1, 9), 0.4))
    with torch.no_grad():
        alone, none = model(video, None, model.prepare_run(vpos, None, vctx, None))
        isolated = BatchPerturbations([PassPerturbation.isolated()], config.num_layers, "cpu", torch.float32)
        beside, _ = model(video, audio, model.prepare_run(vpos, apos, vctx, actx), isolated)
        joint, _ = model(video, audio, model.prepare_run(vpos, apos, vctx, actx))
    assert none is None
    torch.testing.assert_close(alone, beside, atol=1e-6, rtol=1e-6)
    assert (alone - joint).abs().max() > 1e-3  # the audio does reach the video when not isolated


@pytest.mark.parametrize("ancestral", [False, True])
def test_a_captured_video_only_run_replays_the_eager_one(ancestral):
    model = demo_transformer(TransformerConfig.tiny("2.0", num_layers=2), seed=1)
    g = torch.Generator().manual_seed(0)
    text = TextEmbeddings(torch.randn(1, 5, 12, generator=g), torch.randn(1, 5, 12, generator=g))
    setup = guided_setup(model, text, None, video_positions(2, 2, 3, 24.0), None)
    video = noised_state(torch.zeros(1, 12, 128), torch.randn(1, 12, 128, generator=g))
    sigmas = sigma_table(DISTILLED_SIGMAS)
    steps = [AncestralStep(torch.Generator().manual_seed(5)) if ancestral else None for _ in range(2)]
    eager = denoise(setup, video, None, sigmas, **({"step": steps[0]} if ancestral else {}))
    captured = CudaGraphStep(backend=EagerReplay())
    replayed = denoise(setup, video, None, sigmas, step=captured.around(steps[1]) if ancestral else captured)
    assert eager[1] is None and replayed[1] is None
    torch.testing.assert_close(replayed[0].latent, eager[0].latent, atol=1e-6, rtol=1e-6)
    assert not torch.equal(eager[0].latent, video.latent)
