"""Full sampling runs of the tiny LTX-2.5 transformer (`stages.sample`, our sync-free loop) against the 1.2.0
pipelines' loop over 1.2.0's own model, both loaded from the same 2.5 transformer file; fp32, the initial noise drawn
here and passed to the reference as tensors, in one reference call. The stages are the 2.5 pipelines' (see
`tests/unit/test_pipeline25.py`), at fewer steps: the one-stage / stage-1 loop with all four guidance passes (2.3's
scales), the same with the first frame held by an image at strength 0.7 (per-token timesteps, which 1.2.0 also
feeds to the audio<->video modulation), the distilled stage 1 with its ancestral steps (8, seed + 10000), the
stage-2 refinement of a given latent, and DFR's temporal-round refinement (DISTILLED_SIGMAS[4:], ancestral η = 0.5,
seed + 1000: `Stage.ancestral_eta`). Tolerance atol=rtol=1e-4 as for 2.0/2.3 (each forward agrees to ~7e-6, the
guidance amplifies a difference up to 10×); measured max |Δ| per case in the test.
"""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.conditioning.images import EncodedImage
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_latent_length, latent_shape
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.sampling.recipe import ANCESTRAL_SEED_OFFSET
from ltx2_core.sampling import DISTILLED_SIGMAS, STAGE2_SIGMAS, ltx2_sigmas, sigma_table
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import AVLatent, empty_latent, sample
from ltx2_core.types import TextEmbeddings
from support.reference120 import run_reference
from support.transformer25 import write_transformer25

TOL = dict(atol=1e-4, rtol=1e-4)
FRAMES, HEIGHT, WIDTH, FPS, TEXT_TOKENS, SEED = 17, 64, 96, 24.0, 8, 11
CASES = ("guided", "image", "distilled", "eta", "stage2")


def _stage(case: str, image: torch.Tensor) -> Stage:
    video, audio = default_guidance("2.5", TransformerConfig.tiny("2.5").num_layers)
    if case == "guided":
        return Stage(ltx2_sigmas(4), video_guidance=video, audio_guidance=audio)
    if case == "image":
        return Stage(ltx2_sigmas(4), video_guidance=video, audio_guidance=audio,
                     conditions=(EncodedImage(image, 0, 0.7),))
    if case == "distilled":
        return Stage(sigma_table(DISTILLED_SIGMAS), ancestral_seed=SEED + ANCESTRAL_SEED_OFFSET)
    if case == "eta":  # DFR's temporal rounds: η = 0.5, their own seed (seed + 1000·round + tile)
        return Stage(sigma_table(DISTILLED_SIGMAS[4:]), noise_scale=DISTILLED_SIGMAS[4], ancestral_seed=SEED + 1000,
                     ancestral_eta=0.5)
    return Stage(sigma_table(STAGE2_SIGMAS), noise_scale=STAGE2_SIGMAS[0])


def _guidance(params) -> dict | None:
    return None if params is None else dict(cfg=params.cfg, stg=params.stg, stg_blocks=list(params.stg_blocks),
                                           rescale=params.rescale, modality=params.modality)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(ours, reference) final latents of every case."""
    folder = tmp_path_factory.mktemp("loop25")
    config = TransformerConfig.tiny("2.5")
    path = write_transformer25(folder / "transformer.safetensors", demo_transformer(config, seed=2).state_dict(),
                               config)
    model = load_transformer(path)
    g = torch.Generator().manual_seed(5)
    positive, negative = (TextEmbeddings(torch.randn(1, TEXT_TOKENS, 16, generator=g),
                                         torch.randn(1, TEXT_TOKENS, 8, generator=g)) for _ in range(2))
    frames, rows, cols = latent_shape(FRAMES, HEIGHT, WIDTH)
    audio_tokens = audio_latent_length(FRAMES, FPS)
    image = torch.randn(1, 128, 1, rows, cols, generator=g)
    refined = AVLatent(torch.randn(1, 128, frames, rows, cols, generator=g),
                       torch.randn(1, 8, audio_tokens, 16, generator=g), FPS)
    tensors = {"positive_video": positive.video, "positive_audio": positive.audio, "negative_video": negative.video,
               "negative_audio": negative.audio}
    settings, ours = {"path": str(path), "cases": {}}, {}
    for case in CASES:
        stage = _stage(case, image)
        latent = refined if case in ("stage2", "eta") else empty_latent(WIDTH, HEIGHT, FRAMES, FPS)
        ours[case] = sample(model, positive, negative if stage.video_guidance else None, latent, stage,
                            torch.Generator().manual_seed(SEED))
        noise = torch.Generator().manual_seed(SEED)  # what `sample` drew: video, then audio, in the token layout
        tensors |= {f"{case}.noise_video": torch.randn(1, frames * rows * cols, 128, generator=noise),
                    f"{case}.noise_audio": torch.randn(1, audio_tokens, 128, generator=noise),
                    f"{case}.sigmas": stage.sigmas}
        images = [(c.frame, c.strength) for c in stage.conditions]
        tensors |= {f"{case}.image{i}": c.latent for i, c in enumerate(stage.conditions)}
        if case in ("stage2", "eta"):
            tensors |= {f"{case}.initial_video": refined.video.clone(),  # one file holds no shared tensors
                        f"{case}.initial_audio": refined.audio.clone()}
        settings["cases"][case] = dict(
            frames=FRAMES, height=HEIGHT, width=WIDTH, fps=FPS, images=images, noise_scale=stage.noise_scale,
            ancestral_seed=stage.ancestral_seed, eta=stage.ancestral_eta,
            guidance=None if stage.video_guidance is None else [_guidance(stage.video_guidance),
                                                                 _guidance(stage.audio_guidance)])
    return ours, run_reference("transformer25_loop.py", tensors, settings, tmp_path=folder)


@pytest.mark.parametrize("case", CASES)
def test_the_loop_matches_the_reference_pipeline_loop(runs, case):
    ours, want = runs
    got = ours[case]
    assert got.video.shape == want[f"{case}.video"].shape and got.audio.shape == want[f"{case}.audio"].shape
    # measured max |Δ| video / audio (values up to ~5): guided 7.9e-6 / 1.0e-5, image 6.9e-6 / 1.1e-5,
    # distilled 1.2e-6 / 6.0e-7, stage2 1.2e-6 / 7.2e-7
    torch.testing.assert_close(got.video, want[f"{case}.video"], **TOL)
    torch.testing.assert_close(got.audio, want[f"{case}.audio"], **TOL)


def test_the_cases_differ_from_each_other(runs):
    """Each case moved its latent somewhere else: the image and the ancestral noise changed the run."""
    ours, _ = runs
    assert (ours["image"].video - ours["guided"].video).abs().max() > 0.01
    assert (ours["distilled"].video - ours["guided"].video).abs().max() > 0.01
    assert (ours["eta"].video - ours["stage2"].video).abs().max() > 0.01
