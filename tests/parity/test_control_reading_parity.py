"""IC-LoRA control's inputs vs the reference (ltx_pipelines 1.0.0): the LoRA's reference_downscale_factor as
`ICLoraPipeline` reads it, and the control video as `load_video_conditioning` prepares it (real PyAV mp4s and real tiny
LoRA files with metadata, made as in tests/unit/test_control.py)."""

from __future__ import annotations

import pytest
import torch
from support.model_files import write_lora
from support.reference import import_ltx_pipelines
from support.control_video import FRAMES, SIZE, write_video

from ltx2_core.conditioning import ControlCondition, encode_control
from ltx2_core.demo.models import demo_models
from ltx2_core.geometry import latent_shape
from ltx2_core.loader.lora import lora_reference_scale, reference_downscale_factor
from ltx2_core.video_io import read_video


@pytest.fixture(scope="module")
def models():
    return demo_models("2.3")


@pytest.fixture
def control(tmp_path):
    return write_video(tmp_path / "depth.mp4", width=96, height=80, frames=17)


def test_the_factor_is_read_from_the_lora_metadata_as_the_reference_reads_it(tmp_path):
    import_ltx_pipelines()
    from ltx_pipelines.ic_lora import _read_lora_reference_downscale_factor

    plain = write_lora(tmp_path / "style.safetensors", 1)
    half = write_lora(tmp_path / "depth.safetensors", 2, metadata={"reference_downscale_factor": "2"})
    same = write_lora(tmp_path / "pose.safetensors", 3, metadata={"reference_downscale_factor": "1"})
    assert lora_reference_scale(plain) is None and lora_reference_scale(half) == 2 and lora_reference_scale(same) == 1
    for path in (plain, half, same):
        assert (lora_reference_scale(path) or 1) == _read_lora_reference_downscale_factor(str(path))
    assert reference_downscale_factor([]) == 1 and reference_downscale_factor([plain, same]) == 1
    assert reference_downscale_factor([plain, half, same]) == 2  # a LoRA at 1 does not conflict (the reference)



@pytest.mark.parametrize("downscale", [1, 2])
def test_the_control_is_read_as_the_reference_reads_it_and_encoded_at_its_size(models, control, downscale):
    """Its first 9 of 17 frames, at 64×64 / downscale from 96×80 (cover, centre crop): the pixels equal 1.0.0's
    `load_video_conditioning`, the latent the encoder's of them."""
    import_ltx_pipelines()
    from ltx_pipelines.utils.media_io import load_video_conditioning

    size = SIZE // downscale
    ours = read_video(control, size, size, frames=FRAMES)
    theirs = load_video_conditioning(str(control), size, size, FRAMES, torch.float32, torch.device("cpu"))
    assert ours.shape == (1, 3, FRAMES, size, size)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)  # measured: exact
    encoded = encode_control(ControlCondition(control, 0.8, downscale), models.video_encoder, FRAMES, SIZE, SIZE)
    assert encoded.strength == 0.8 and encoded.downscale == downscale
    assert encoded.latent.shape == (1, 128, *latent_shape(FRAMES, size, size))
    torch.testing.assert_close(encoded.latent, models.video_encoder(ours), atol=0, rtol=0)
