"""The bookkeeping of DFR's temporal rounds (`ltx2_core.dfr`): the slot seeds and the carried keyframes against
ltx-pipelines 1.2.0's own helpers (`_slot_initials_from_video`, `_merge_carry_forward_keyframes`, run in its Python;
both select and reorder latent frames, so they compare exactly), and the steps `DFRPipeline.__call__` does inline
(the first tile's slot wins, a tile's images, the output length, the sound's cut) by the reference's numbers."""

from __future__ import annotations

import pytest
import torch
from support.reference120 import run_reference

from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.dfr import carried_keyframes, first_slots, output_frames, slot_seeds, sound_samples, tile_images
from ltx2_core.dfr_layout import tiles

SLOT_FRAMES = [4, 12, 20, 28, 36, 100]  # halves: round(0.5) = 0, round(2.5) = 2 (to even), 100: clamped


def test_seeds_and_carried_keyframes_equal_the_reference(tmp_path):
    g = torch.Generator().manual_seed(0)
    video = torch.randn(1, 4, 9, 2, 3, generator=g)
    anchors, slots = torch.randn(1, 4, 2, 2, 3, generator=g), torch.randn(1, 4, 3, 2, 3, generator=g)
    settings = {"slot_frames": SLOT_FRAMES, "anchor_frames": [48, 96], "slot_frames2": [24, 72, 96]}
    ref = run_reference("dfr_helpers.py", {"video": video, "anchors": anchors, "slots": slots}, settings, tmp_path)
    seeds = slot_seeds(video, SLOT_FRAMES)
    assert torch.equal(seeds, ref["seeds"])  # frames selected: a copy
    assert torch.equal(seeds, video[:, :, [0, 2, 2, 4, 4, 8]])
    frames, carried = carried_keyframes([48, 96], anchors, [24, 72, 96], slots)
    assert frames == ref["carried_frames"].tolist() == [24, 48, 72, 96]
    assert torch.equal(carried, ref["carried"]) and torch.equal(carried[:, :, 3], slots[:, :, 2])  # the slot wins


def test_the_inline_steps_of_a_round():
    latents = torch.arange(4.0).reshape(1, 1, 4, 1, 1)
    frames, kept = first_slots([72, 24, 72, 120], latents)
    assert frames == [24, 72, 120] and kept.flatten().tolist() == [1.0, 0.0, 3.0]  # the earlier tile's 72
    layout = tiles([48, 96, 144, 192], 193, 2)  # tile 2 owns segments 2-3, with one segment of lead-in from 48
    images = [ImageCondition("a.png", 0), ImageCondition("b.png", 60), ImageCondition("c.png", 150)]
    assert tile_images(images, layout[0]) == images  # the first tile keeps every image, as the reference
    assert tile_images(images, layout[1]) == [images[1]._replace(frame=12), images[2]._replace(frame=102)]
    assert output_frames(121, 0) == 121 and output_frames(121, 2) == 481
    assert sound_samples(250_000, 241, 48.0, 48_000) == 241_000 and sound_samples(100, 241, 48.0, 48_000) == 100


@pytest.mark.parametrize("anchors, slots", [(None, None), (torch.zeros(1, 1, 1, 1, 1), torch.zeros(1, 1, 2, 1, 1))])
def test_carrying_mismatched_or_no_keyframes_is_refused(anchors, slots):
    with pytest.raises(ValueError):
        carried_keyframes([] if anchors is None else [8, 16], anchors, [] if slots is None else [4], slots)
