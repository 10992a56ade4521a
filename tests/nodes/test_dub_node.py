"""LTX-2 Dub (Dub-It) takes ComfyUI's IMAGE frames and AUDIO: it runs the pipeline's Dub-It request (the clip's
frames floored to 8k+1 at its fps, the IC-LoRA picked from models/loras fused in both stages) and refuses bad input
naming the fix before any model work."""

from __future__ import annotations

import math

import pytest
import torch

from ltx2_core import Models
from ltx2_core.conditioning import Dub
from ltx2_core.pipeline import Request, generator_on, sample_request
from ltx2_core.stages import decode
from ltx2_core.video_io import VideoFrames
from ltx2_core import load_lora
from support.model_files import write_lora
from support.node_calls import node

from nodes.dub import LTX2Dub


def _clip(count: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(count, 64, 96, 3, generator=torch.Generator().manual_seed(seed))


def _sound(seconds: float, rate: int = 16000) -> dict:
    t = torch.arange(round(seconds * rate)) / rate
    return {"waveform": (0.3 * torch.sin(2 * math.pi * 330 * t)).repeat(2, 1)[None], "sample_rate": rate}


@pytest.fixture(scope="module")
def dub_files(files, loaded, tmp_path_factory):
    folder = tmp_path_factory.mktemp("dub")
    ic = write_lora(folder / "dub-it.safetensors", seed=3, version="2.0", metadata={"reference_downscale_factor": "1"})
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], loaded[0])
    return str(ic), upsampler


def test_the_node_runs_the_pipelines_dub_it_request(loaded, dub_files):
    model, _, conditioning, _ = loaded
    ic, upsampler = dub_files
    clip, sound = _clip(11), _sound(0.5)  # 11 frames: dubbed over the first 9
    images, audio, fps = node("LTX2Dub", model, upsampler, conditioning, clip, sound, 24.0, ic, 128, 64, 5, 1.0)
    assert images.shape == (9, 64, 128, 3) and fps == 24.0 and audio["waveform"].shape[:2] == (1, 2)

    dub = Dub(VideoFrames(clip, 24.0), 1.0, 1, node_sound(sound))
    request = Request("a", width=128, height=64, frames=9, fps=24.0, seed=5, mode="distilled", dub=dub)
    models = Models(model.host.transformer, None, model.decoders, upsampler, None, model.video_encoder,
                    model.audio_encoder, ((load_lora(ic), 1.0),))
    with model.host.sampler(model.loras) as (sampler, _):
        latent, generator = sample_request(request, models, conditioning.positive, None, sampler=sampler)
    want = decode(latent, model.decoders, generator=generator_on(generator, 5, model.decoders))
    torch.testing.assert_close(images, want.frames, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio["waveform"][0], want.waveform, atol=1e-5, rtol=0)


def node_sound(audio: dict):
    from nodes.audio import comfy_sound

    return comfy_sound(audio)


@pytest.mark.parametrize("clip, sound, fix", [
    (_clip(8), _sound(0.5), "at least 9 frames"),
    (_clip(9), _sound(0.2), "the sound covers 0.200 s of the clip's 0.375 s"),
    (_clip(9), None, "connect its AUDIO"),
])
def test_bad_clips_are_refused_naming_the_fix(loaded, dub_files, clip, sound, fix):
    model, _, conditioning, _ = loaded
    ic, upsampler = dub_files
    with pytest.raises(ValueError, match=fix):
        node("LTX2Dub", model, upsampler, conditioning, clip, sound, 24.0, ic, 128, 64, 5, 1.0)


def test_a_plain_lora_and_a_size_off_64_are_refused_when_queued(files, dub_files):
    ic, _ = dub_files
    assert "not an IC-LoRA: pick the Dub-It IC-LoRA" in LTX2Dub.VALIDATE_INPUTS(ic_lora=files["style"])
    assert LTX2Dub.VALIDATE_INPUTS(fps=24.0, ic_lora=ic, width=128, height=64, strength=1.0) is True
    problem = LTX2Dub.VALIDATE_INPUTS(fps=24.0, ic_lora=ic, width=96, height=64, strength=1.0)
    assert problem.startswith("width:") and "multiples of 64" in problem
