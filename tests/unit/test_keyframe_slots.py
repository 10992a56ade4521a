"""Generated keyframe slots (`conditioning.keyframe_slots`, DFR) on a toy stream and in the sampler: the tokens they
append (mask 1, one pixel frame in time, marked for the keyframe embedding, starting from their content), what they
refuse, that a stage returns their denoised content with no host sync per step, that the marks reach the transformer
(dropping them changes the slots). Parity with ltx-core 1.2.0: tests/parity/test_keyframe_slots_parity.py; on
workers: tests/nodes/test_dfr_node.py."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import CONDITIONS, EncodedImage, condition_kind, condition_video
from ltx2_core.conditioning.keyframe_slots import KeyframeSlots
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import patchify_video, video_positions
from ltx2_core.model.transformer import model as transformer_model
from ltx2_core.sampling import STAGE2_SIGMAS, sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import AVLatent, empty_latent, sample
from ltx2_core.types import TextEmbeddings

FRAMES, ROWS, COLS, FPS = 3, 2, 3, 24.0  # 17 pixel frames, 6 tokens per latent frame
GRID_TOKENS, PER_FRAME = FRAMES * ROWS * COLS, ROWS * COLS


def _stream(conditions, grid=(FRAMES, ROWS, COLS)):
    clean = torch.randn(1, GRID_TOKENS, 128, generator=torch.Generator().manual_seed(0))
    return condition_video(clean, video_positions(FRAMES, ROWS, COLS, FPS), conditions, FPS, keyframe_frames=1,
                           grid=grid)


def test_slots_append_marked_generated_tokens_at_single_frames():
    image = torch.randn(1, 128, 1, ROWS, COLS)
    content = torch.randn(1, 128, 2, ROWS, COLS)
    stream = _stream([EncodedImage(image, 4, 0.9), KeyframeSlots((8, 16), content), EncodedImage(image, 12, 1.0)])
    first = GRID_TOKENS + PER_FRAME
    assert stream.slots == (first, 2) and condition_kind(KeyframeSlots((8,))) == "keyframe_slots"
    assert CONDITIONS["keyframe_slots"] is KeyframeSlots
    marks = stream.marked[0, :, 0]
    assert marks.tolist() == [0.0] * first + [1.0] * 2 * PER_FRAME + [0.0] * PER_FRAME  # only the slots
    slots = slice(first, first + 2 * PER_FRAME)
    assert stream.mask[0, slots].eq(1).all() and stream.clean[0, slots].eq(0).all()  # generated, clean unused
    # the slots start from their content (a copy: exact); the images' tokens from zeros
    assert torch.equal(stream.initial[:, PER_FRAME:3 * PER_FRAME], patchify_video(content))
    assert stream.initial[:, :PER_FRAME].eq(0).all() and stream.initial[:, 3 * PER_FRAME:].eq(0).all()
    time = stream.positions[0, 0, slots]
    assert torch.allclose(time[:PER_FRAME], torch.tensor([8 / FPS, 9 / FPS]).expand(PER_FRAME, 2))
    assert torch.allclose(time[PER_FRAME:], torch.tensor([16 / FPS, 17 / FPS]).expand(PER_FRAME, 2))
    assert torch.equal(stream.positions[0, 1:, slots][:, :PER_FRAME], stream.positions[0, 1:, :PER_FRAME])


@pytest.mark.parametrize("make, message", [
    (lambda: KeyframeSlots(()), "non-negative and strictly increasing"),
    (lambda: KeyframeSlots((16, 8)), "non-negative and strictly increasing"),
    (lambda: KeyframeSlots((8,), torch.zeros(1, 128, 2, ROWS, COLS)), r"\(1, 128, 1, H', W'\)"),
])
def test_bad_slots_are_refused_when_made(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("conditions, grid, message", [
    ([KeyframeSlots((17,))], (FRAMES, ROWS, COLS), "outside the clip's 17 frames"),
    ([KeyframeSlots((8,), torch.zeros(1, 128, 1, 3, 3))], (FRAMES, ROWS, COLS), "does not match the video's"),
    ([KeyframeSlots((8,)), KeyframeSlots((12,))], (FRAMES, ROWS, COLS), "give all slots in one condition"),
    ([KeyframeSlots((8,))], None, "need the video's latent grid"),
])
def test_slots_that_do_not_fit_the_stream_are_refused(conditions, grid, message):
    with pytest.raises(ValueError, match=message):
        _stream(conditions, grid)


def test_a_stage_pickles_its_slots():
    stage = Stage(sigma_table(STAGE2_SIGMAS), conditions=[KeyframeSlots((8, 16), torch.ones(1, 128, 2, 2, 3))])
    moved = pickle.loads(pickle.dumps(stage.cpu()))
    assert moved.conditions[0].frames == (8, 16) and torch.equal(moved.conditions[0].initial, torch.ones(1, 128, 2, 2, 3))


@pytest.fixture(scope="module")
def model():
    return demo_transformer(dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True), seed=3)


def _text(seed=0):
    g = torch.Generator().manual_seed(seed)
    return TextEmbeddings(torch.randn(1, 7, 16, generator=g), torch.randn(1, 7, 8, generator=g))


def _sample(model, step=None, **stage):
    latent = empty_latent(96, 64, 17, FPS)
    latent = latent._replace(video=torch.randn(latent.video.shape, generator=torch.Generator().manual_seed(1)))
    stage = Stage(sigma_table(STAGE2_SIGMAS), noise_scale=STAGE2_SIGMAS[0],
                  conditions=[KeyframeSlots((8, 16), torch.randn(1, 128, 2, ROWS, COLS))], **stage)
    kwargs = {} if step is None else {"step": step}
    return sample(model, _text(), None, latent, stage, torch.Generator().manual_seed(0), **kwargs)


def test_a_stage_returns_its_slots_with_no_host_sync_per_step(model):
    from ltx2_core.sampling import guided_step
    from support.census import OpCensus

    censuses = []

    def counted(plan, video, audio, sigma, sigma_next):
        with OpCensus() as census:
            out = guided_step(plan, video, audio, sigma, sigma_next)
        censuses.append(census)
        return out

    result = _sample(model, counted)
    assert isinstance(result, AVLatent) and result.keyframes.shape == (1, 128, 2, ROWS, COLS)
    assert result.video.shape == (1, 128, FRAMES, ROWS, COLS)  # the slots are not part of the video
    assert len(censuses) == 3 and all(c.syncs() == {} and c.transfers() == 0 for c in censuses)
    ancestral = _sample(model, ancestral_seed=5, ancestral_eta=0.5)
    assert (ancestral.keyframes - result.keyframes).abs().max() > 1e-3


def test_the_marks_reach_the_transformer(model, monkeypatch):
    marked = _sample(model)
    monkeypatch.setattr(transformer_model, "keyframe_marks", lambda positions, _, dtype:
                        transformer_model.first_frame_mask(positions, dtype))
    unmarked = _sample(model)
    assert (marked.keyframes - unmarked.keyframes).abs().max() > 1e-3


def test_carried_keyframes_are_appended_from_frame_0_and_unmarked():
    from ltx2_core.conditioning.keyframe_slots import CarriedKeyframes

    latents = torch.randn(1, 128, 2, ROWS, COLS)
    carried = CarriedKeyframes(latents, (0, 16), 0.95)
    stream = _stream([carried, KeyframeSlots((8,))])
    assert condition_kind(carried) == "carried_keyframes" and stream.clean.shape[1] == GRID_TOKENS + 3 * PER_FRAME
    own = slice(0, GRID_TOKENS)
    assert stream.mask[0, own].eq(1).all()  # frame 0 is not held in place (unlike an image at frame 0)
    assert torch.equal(stream.clean[:, GRID_TOKENS:GRID_TOKENS + 2 * PER_FRAME], patchify_video(latents))  # copies
    assert torch.allclose(stream.mask[0, GRID_TOKENS:GRID_TOKENS + 2 * PER_FRAME], torch.tensor(0.05))
    assert torch.allclose(stream.positions[0, 0, GRID_TOKENS], torch.tensor([0.0, 1 / FPS]))
    assert stream.marked[0, :, 0].tolist() == [0.0] * (GRID_TOKENS + 2 * PER_FRAME) + [1.0] * PER_FRAME
    with pytest.raises(ValueError, match="one latent frame per frame"):
        _stream([CarriedKeyframes(latents, (0,), 0.95)])
