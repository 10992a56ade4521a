"""Generated keyframe slots (`conditioning.keyframe_slots`, DFR) against ltx-core 1.2.0's
`VideoGeneratedKeyframeSlots`, after an image keyframe (`VideoConditionByKeyframeIndex`, unmarked): the conditioned
and noised video state (start values, clean values, denoise mask, positions, and the per-token keyframe marks: the
first latent frame and the slots), then whole sampling runs of the tiny 2.5 transformer with the keyframe embedding
(`stages.sample` against the 1.2.0 pipelines' loop and `clear_conditioning`), which must return the slots' denoised
content: a stage-2-like run (Euler, slots seeded from content, noise scale 0.909375), a temporal-round-like run
(carried keyframes at strength 0.95 from frame 0 on (`CarriedKeyframes`), ancestral eta 0.5, `DISTILLED_SIGMAS[4:]`,
its own seed) and unseeded slots from pure noise. fp32; the state compares to 1e-6 (the same lerps), the
runs at atol=rtol=1e-4 as the 2.5 loop parity (tests/parity/test_transformer25_loop_parity.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import EncodedImage, condition_video
from ltx2_core.conditioning.keyframe_slots import CarriedKeyframes, KeyframeSlots
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_latent_length, latent_shape, patchify_video, video_positions
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.model.transformer.model import keyframe_marks
from ltx2_core.sampling import DISTILLED_SIGMAS, STAGE2_SIGMAS, sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.sampling.steps import noised_from
from ltx2_core.stages import AVLatent, sample
from ltx2_core.types import TextEmbeddings
from support.reference120 import run_reference
from support.transformer25 import write_transformer25

TOL = dict(atol=1e-4, rtol=1e-4)
FRAMES, HEIGHT, WIDTH, FPS, TEXT_TOKENS, SEED = 33, 64, 96, 24.0, 8, 11
CASES = {"stage2": dict(slots=[8, 16, 32], image_frame=24, image_strength=0.8, noise_scale=STAGE2_SIGMAS[0],
                        ancestral_seed=None, eta=1.0, sigmas=STAGE2_SIGMAS, seeded=True),
         "round": dict(slots=[12, 28], anchors=[0, 24, 32], anchor_strength=0.95, noise_scale=DISTILLED_SIGMAS[4],
                       ancestral_seed=SEED + 1000, eta=0.5, sigmas=DISTILLED_SIGMAS[4:], seeded=True),
         "empty": dict(slots=[4, 28], image_frame=16, image_strength=1.0, noise_scale=1.0, ancestral_seed=None,
                       eta=1.0, sigmas=STAGE2_SIGMAS, seeded=False)}


def _stage(case: dict, image: torch.Tensor, initial: torch.Tensor | None, anchors: torch.Tensor | None) -> Stage:
    if anchors is None:
        conditions = (EncodedImage(image, case["image_frame"], case["image_strength"]),)
    else:  # a temporal round's carried keyframes, frame 0 (a tile's opening seam) appended too
        conditions = (CarriedKeyframes(anchors, tuple(case["anchors"]), case["anchor_strength"]),)
    conditions += (KeyframeSlots(tuple(case["slots"]), initial),)
    return Stage(sigma_table(case["sigmas"]), noise_scale=case["noise_scale"], conditions=conditions,
                 ancestral_seed=case["ancestral_seed"], ancestral_eta=case["eta"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slots")
    config = dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True)
    path = write_transformer25(folder / "keyframes.safetensors", demo_transformer(config, seed=3).state_dict(), config)
    model = load_transformer(path)
    frames, rows, cols = latent_shape(FRAMES, HEIGHT, WIDTH)
    g = torch.Generator().manual_seed(5)
    context = TextEmbeddings(torch.randn(1, TEXT_TOKENS, 16, generator=g), torch.randn(1, TEXT_TOKENS, 8, generator=g))
    latent = AVLatent(torch.randn(1, 128, frames, rows, cols, generator=g),
                      torch.randn(1, 8, audio_latent_length(FRAMES, FPS), 16, generator=g), FPS)
    image = torch.randn(1, 128, 1, rows, cols, generator=g)
    tensors = {"initial_video": latent.video, "initial_audio": latent.audio, "image": image,
               "context_video": context.video, "context_audio": context.audio}
    settings = {"path": str(path), "frames": FRAMES, "height": HEIGHT, "width": WIDTH, "fps": FPS, "cases": {}}
    ours, streams = {}, {}
    for name, case in CASES.items():
        initial = torch.randn(1, 128, len(case["slots"]), rows, cols, generator=g) if case["seeded"] else None
        anchors = torch.randn(1, 128, len(case["anchors"]), rows, cols, generator=g) if "anchors" in case else None
        stage = _stage(case, image, initial, anchors)
        ours[name] = sample(model, context, None, latent, stage, torch.Generator().manual_seed(SEED))
        stream = condition_video(patchify_video(latent.video), video_positions(frames, rows, cols, FPS),
                                 stage.conditions, FPS, keyframe_frames=1, grid=(frames, rows, cols))
        noise = torch.Generator().manual_seed(SEED)  # what `sample` drew: video (own + appended tokens), then audio
        noise_video = torch.randn(1, stream.clean.shape[1], 128, generator=noise)
        tensors |= {f"{name}.noise_video": noise_video,
                    f"{name}.noise_audio": torch.randn(1, latent.audio.shape[2], 128, generator=noise),
                    f"{name}.sigmas": stage.sigmas}
        if initial is not None:
            tensors[f"{name}.slot_initial"] = initial
        if anchors is not None:
            tensors[f"{name}.anchors"] = anchors
        streams[name] = (stream, noise_video)
        settings["cases"][name] = {k: v for k, v in case.items() if k not in ("sigmas", "seeded")}
    return ours, streams, latent, run_reference("keyframe_slots.py", tensors, settings, tmp_path=folder)


@pytest.mark.parametrize("case", list(CASES))
def test_the_conditioned_state_matches_the_reference(runs, case):
    _, streams, latent, want = runs
    stream, noise = streams[case]
    own = patchify_video(latent.video)
    appended = stream.initial if stream.initial is not None else own.new_zeros(1, stream.clean.shape[1] - own.shape[1],
                                                                                  128)
    start = torch.cat([own, appended], dim=1)  # the slots' content (zeros for the image keyframe's tokens)
    noised = noised_from(start, stream.clean, noise, CASES[case]["noise_scale"], stream.mask)
    torch.testing.assert_close(noised.latent, want[f"{case}.state.latent"], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(stream.clean, want[f"{case}.state.clean_latent"], atol=0, rtol=0)  # copies
    torch.testing.assert_close(stream.mask, want[f"{case}.state.denoise_mask"], atol=1e-6, rtol=0)
    torch.testing.assert_close(stream.positions, want[f"{case}.state.positions"], atol=1e-6, rtol=1e-6)
    marks = keyframe_marks(stream.positions, stream.marked, torch.float32)
    assert torch.equal(marks, want[f"{case}.state.keyframes_mask"])  # 0/1 per token: exact
    rows, cols = latent.video.shape[3:]
    assert marks.sum() == (1 + len(CASES[case]["slots"])) * rows * cols  # first frame + slots, not the image


@pytest.mark.parametrize("case", list(CASES))
def test_a_stage_returns_the_slots_as_the_reference_does(runs, case):
    ours, _, _, want = runs
    got = ours[case]
    assert got.keyframes.shape == want[f"{case}.keyframes"].shape == (1, 128, len(CASES[case]["slots"]),
                                                                      *got.video.shape[3:])
    torch.testing.assert_close(got.video, want[f"{case}.video"], **TOL)
    torch.testing.assert_close(got.keyframes, want[f"{case}.keyframes"], **TOL)
    torch.testing.assert_close(got.audio, want[f"{case}.audio"], **TOL)
