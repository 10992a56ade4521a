"""LTX-2.5's duration head against ltx-core 1.2.0's DurationHead (built by its own configurator from the same
metadata, loaded through its own key ops), fp32, tiny widths, random weights: the seconds for video and audio
contexts together and each alone, and ltx-pipelines' frame count for a range of lengths, frame rates and bounds.

Tolerance rtol 5e-6: both run the same fp32 projections, one attention over the joined tokens and the MLP; ours
splits PyTorch MultiheadAttention's stacked projection into three matmuls and runs SDPA (measured ≤ 1.2e-6: the exp
amplifies the log-duration's rounding; an erf GELU in place of the tanh one is off by 2.2e-5, and fails). The frame
counts are integers and equal exactly. Loading: the head found among other keys of a released-layout file, none in a
file without one, a file missing a tensor refused by name."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from support.reference120 import run_reference

from ltx2_core.model.duration_head import DurationHead, DurationHeadConfig, clip_frames, load_duration_head

SECTIONS = {"transformer": {"cross_attention_dim": 48, "audio_cross_attention_dim": 32},
            "duration_head": {"pooler_hidden_dim": 24, "num_queries": 2, "num_pooler_heads": 3, "mlp_hidden": 20}}
# (seconds, fps, min s, max s): inside, clamped above and below, snapped up to the minimum, odd rates
LENGTHS = [(5.0, 24.0, 1.0, 20.0), (37.2, 24.0, 1.0, 20.0), (0.1, 24.0, 1.0, 20.0), (1.02, 25.0, 1.0, 20.0),
           (3.3, 30.0, 2.5, 4.0), (7.77, 23.976, 1.0, 20.0), (0.5, 8.0, 0.4, 0.6)]


def _tensors(seed: int = 3) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        head = DurationHead(DurationHeadConfig.from_metadata(SECTIONS))
    return {"duration_head." + key: torch.randn(value.shape, generator=generator) * (0.3 if value.dim() > 1 else 0.1)
            for key, value in head.state_dict().items()}


def _file(path, tensors: dict[str, torch.Tensor]):
    others = {"model.diffusion_model.scale_shift_table": torch.zeros(6, 48)}  # the head beside the transformer's keys
    save_file({**others, **tensors}, str(path), metadata={"config": json.dumps(SECTIONS)})
    return path


def test_the_head_and_the_frame_counts_match_the_reference(tmp_path):
    tensors = _tensors()
    head = load_duration_head(_file(tmp_path / "ltx-2.5.safetensors", tensors))
    generator = torch.Generator().manual_seed(4)
    video, audio = torch.randn(1, 10, 48, generator=generator), torch.randn(1, 7, 32, generator=generator)
    ref = run_reference("duration_head.py", {**tensors, "video": video, "audio": audio},
                        {"config": json.dumps(SECTIONS), "lengths": LENGTHS}, tmp_path)
    with torch.no_grad():
        ours = {"both": head(video, audio), "video": head(video), "audio": head(None, audio)}
    for name, seconds in ours.items():
        assert seconds.shape == (1,) and seconds.item() > 0
        torch.testing.assert_close(seconds, ref[name], rtol=5e-6, atol=0)
    assert len({round(s.item(), 4) for s in ours.values()}) == 3  # each modality changes the prediction
    assert [clip_frames(*length) for length in LENGTHS] == ref["frames"].tolist()  # integers: exact


def test_a_file_without_a_head_has_none_and_an_incomplete_one_is_refused(tmp_path):
    assert load_duration_head(_file(tmp_path / "ltx-2.3.safetensors", {})) is None
    tensors = _tensors()
    del tensors["duration_head.attention_pooler.query_tokens"]
    with pytest.raises(ValueError, match="lacks attention_pooler.query_tokens"):
        load_duration_head(_file(tmp_path / "broken.safetensors", tensors))


def test_bad_lengths_are_refused():
    with pytest.raises(ValueError, match="0 < min ≤ max"):
        clip_frames(5.0, 24.0, 3.0, 2.0)
    with pytest.raises(ValueError, match="no frame"):
        clip_frames(5.0, 24.0, 0.01, 0.01)
    with pytest.raises(ValueError, match="video or audio"):
        DurationHead(DurationHeadConfig.from_metadata(SECTIONS))()
