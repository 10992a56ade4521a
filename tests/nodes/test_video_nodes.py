"""LTX2VideoGuide (IC-LoRA control frames, chainable) and LTX2Retake (a span of a clip's frames and sound) take
ComfyUI's IMAGE and AUDIO: the sampler and the generate node run them as the pipeline runs the same request, the
IC-LoRA's downscale factor comes from the LoRA the model carries, and bad input is refused naming the fix before
any model work."""

from __future__ import annotations

import math

import pytest
import torch

from ltx2_core import Models
from ltx2_core.conditioning import ControlCondition, Retake
from ltx2_core.pipeline import Request, sample_request
from ltx2_core.video_io import VideoFrames
from support.model_files import write_lora
from support.node_calls import node


def _frames(count: int, height: int = 64, width: int = 128, seed: int = 0) -> torch.Tensor:
    """(count, height, width, 3) float in [0, 1]: moving gradients with noise, like a depth video."""
    y, x = torch.meshgrid(torch.linspace(0, 1, height), torch.linspace(0, 1, width), indexing="ij")
    noise = torch.rand(count, height, width, 3, generator=torch.Generator().manual_seed(seed))
    frames = torch.stack([torch.stack([(x + i / count) % 1, y, (x * y + i / 7) % 1], -1) for i in range(count)])
    return (0.9 * frames + 0.1 * noise).clamp(0, 1)


def _sound(seconds: float, rate: int = 16000) -> dict:
    t = torch.arange(round(seconds * rate)) / rate
    return {"waveform": (0.3 * torch.sin(2 * math.pi * 330 * t)).repeat(2, 1)[None], "sample_rate": rate}


@pytest.fixture(scope="module")
def ic_lora(loaded, tmp_path_factory):
    """The model with a tiny IC-LoRA asking for its control at half the size (reference_downscale_factor 2)."""
    path = write_lora(tmp_path_factory.mktemp("ic") / "ic.safetensors", seed=3, version="2.0",
                      metadata={"reference_downscale_factor": "2"})
    (model,) = node("LTX2LoraLoader", loaded[0], str(path), 1.0)
    return model


def test_guides_chain_and_the_sampler_runs_them_as_the_pipeline(loaded, ic_lora):
    _, encoder, conditioning, guidance = loaded
    depth, pose = _frames(9), _frames(17, seed=1)
    (first,) = node("LTX2VideoGuide", depth, 1.0, 1.0)
    (both,) = node("LTX2VideoGuide", pose, 0.7, 1.0, guides=first)
    assert [(g.frames is f, g.strength, g.attention_strength) for g, f in zip(both, (depth, pose))] == [
        (True, 1.0, 1.0), (True, 0.7, 1.0)]
    (latent,) = node("LTX2EmptyLatent", 128, 64, 9, 24.0)
    (out,) = node("LTX2Sampler", ic_lora, conditioning, latent, 4, 2, "ltx2", guidance=guidance, guides=both)
    assert out.video.shape == latent.video.shape  # the guiding tokens are dropped after the last step

    controls = tuple(ControlCondition(VideoFrames(f, 24.0), s, 2) for f, s in ((depth, 1.0), (pose, 0.7)))
    request = Request("a", width=128, height=64, frames=9, steps=2, seed=4, video_guidance=guidance[0],
                      audio_guidance=guidance[1], controls=controls)
    models = Models(ic_lora.host.transformer, encoder, ic_lora.decoders, video_encoder=ic_lora.video_encoder)
    with ic_lora.host.sampler(ic_lora.loras) as (sampler, _):
        want, _ = sample_request(request, models, conditioning.positive, conditioning.negative, sampler=sampler)
    torch.testing.assert_close(out.video, want.video, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.audio, want.audio, atol=1e-6, rtol=0)
    (free,) = node("LTX2Sampler", ic_lora, conditioning, latent, 4, 2, "ltx2", guidance=guidance)
    assert (free.video - out.video).abs().max() > 1e-3  # the guides steered it


def test_the_generate_node_takes_guides_and_a_retake(loaded, ic_lora):
    _, encoder, _, _ = loaded
    (guides,) = node("LTX2VideoGuide", _frames(9), 1.0, 1.0)
    images, audio, fps = node("LTX2Generate", ic_lora, encoder, "a cat", negative_prompt="blurry", mode="one-stage",
                              width=128, height=64, frames=9, fps=24.0, seed=1, steps=2, guides=guides)
    assert images.shape == (9, 64, 128, 3) and fps == 24.0

    clip = _frames(9, 64, 96, seed=2)
    (retake,) = node("LTX2Retake", clip, 24.0, 0.1, 0.3, False, False, audio=_sound(0.5))
    assert isinstance(retake, Retake) and retake.span == (0.1, 0.3) and retake.sound.rate == 16000
    assert retake.info() == (96, 64, 9, 24.0, True)
    model = loaded[0]
    images, audio, fps = node("LTX2Generate", model, encoder, "a dog barks", negative_prompt="", mode="one-stage",
                              width=768, height=512, frames=121, fps=25.0, seed=1, steps=2, retake=retake)
    assert images.shape == (9, 64, 96, 3) and fps == 24.0  # the clip's own size, frames and rate
    assert audio["waveform"].shape[:2] == (1, 2) and audio["waveform"].abs().max() > 0
    (silent,) = node("LTX2Retake", clip, 24.0, 0.0, 0.2, False, True)  # no sound: generated over the clip
    images, _, _ = node("LTX2Generate", model, encoder, "rain", negative_prompt="", mode="distilled", width=32,
                        height=32, frames=9, fps=24.0, seed=1, steps=0, retake=silent)
    assert images.shape == (9, 64, 96, 3)


def test_the_generate_node_fuses_the_ic_lora_around_stage_one_only(loaded, ic_lora, files):
    """Distilled two-stage with a guide: the IC-LoRA guides stage 1 and stage 2 refines without it (the reference's
    ICLoraPipeline); the same as the pipeline with the LoRA as `Models.ic_loras`, and not as with it fused for both."""
    from ltx2_core import generate

    _, encoder, _, _ = loaded
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], ic_lora)
    (guides,) = node("LTX2VideoGuide", _frames(9, 32, 64), 1.0, 1.0)
    images, _, _ = node("LTX2Generate", ic_lora, encoder, "a cat", negative_prompt="", mode="distilled", width=256,
                        height=128, frames=9, fps=24.0, seed=1, steps=0, upsampler=upsampler, guides=guides)
    request = Request("a cat", "", width=256, height=128, frames=9, seed=1, mode="distilled",
                      controls=(ControlCondition(VideoFrames(_frames(9, 32, 64), 24.0), 1.0, 2),))
    models = Models(ic_lora.host.transformer, encoder, ic_lora.decoders, upsampler, video_encoder=ic_lora.video_encoder,
                    ic_loras=ic_lora.loras)
    with ic_lora.host.sampler(()) as (sampler, _):
        want = generate(request, models, sampler=sampler).frames
    torch.testing.assert_close(images, want, atol=1e-5, rtol=0)
    with ic_lora.host.sampler(ic_lora.loras) as (sampler, _):
        both = generate(request, models._replace(ic_loras=()), sampler=sampler).frames
    assert (both - want).abs().max() > 1e-4  # fused for stage 2 too would differ


def test_a_guide_without_an_ic_lora_is_refused_naming_the_fix(loaded):
    model, encoder, conditioning, _ = loaded
    (guides,) = node("LTX2VideoGuide", _frames(9), 1.0, 1.0)
    (latent,) = node("LTX2EmptyLatent", 128, 64, 9, 24.0)
    message = r"through an IC-LoRA.*has no LoRA: add LTX-2 LoRA Loader with the IC-LoRA"
    with pytest.raises(ValueError, match=message):
        node("LTX2Sampler", model, conditioning, latent, 4, 2, "ltx2", guides=guides)
    with pytest.raises(ValueError, match=message):
        node("LTX2Generate", model, encoder, "a cat", negative_prompt="", mode="one-stage", width=128, height=64,
             frames=9, fps=24.0, seed=1, steps=2, guides=guides)


def test_control_frames_fewer_than_the_clip_are_refused_saying_how_many(loaded, ic_lora):
    _, encoder, conditioning, _ = loaded
    (guides,) = node("LTX2VideoGuide", _frames(9), 1.0, 1.0)
    (latent,) = node("LTX2EmptyLatent", 128, 64, 17, 24.0)
    message = r"has 9 frames and the clip 17; the control needs at least as many frames as the clip"
    with pytest.raises(ValueError, match=message):
        node("LTX2Sampler", ic_lora, conditioning, latent, 4, 2, "ltx2", guides=guides)
    with pytest.raises(ValueError, match=message + r".*or generate 9 frames"):
        node("LTX2Generate", ic_lora, encoder, "a cat", negative_prompt="", mode="one-stage", width=128, height=64,
             frames=17, fps=24.0, seed=1, steps=2, guides=guides)
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)  # 96 / 2 = 48: not a multiple of 32
    with pytest.raises(ValueError, match=r"1/2 of the 96x64 stage.*multiples of 64"):
        node("LTX2Sampler", ic_lora, conditioning, latent, 4, 2, "ltx2", guides=guides)


@pytest.mark.parametrize("images, match", [
    (torch.zeros(0, 64, 64, 3), r"is empty; give at least one frame"),
    (torch.zeros(9, 64, 64, 4), r"must be \(frames, height, width, 3\) RGB, ComfyUI's IMAGE, got \(9, 64, 64, 4\)"),
    (torch.full((9, 64, 64, 3), 1.5), r"values in \[1.5, 1.5\]; IMAGE frames are floats in \[0, 1\]"),
])
def test_bad_guide_frames_are_refused_when_the_node_runs(images, match):
    with pytest.raises(ValueError, match=match):
        node("LTX2VideoGuide", images, 1.0, 1.0)


@pytest.mark.parametrize("images, start, end, audio, match", [
    (_frames(9, 64, 96), 0.2, 0.5, None, r"span ends at 0.5 s and video frames \(9x64x96.*lasts 0.375 s.*give an end "
                                          r"≤ 0.375"),
    (_frames(9, 64, 96), 0.4, 0.5, None, r"span ends at 0.5 s"),
    (_frames(9, 64, 96), 0.3, 0.3, None, r"span \[0.3, 0.3\) s is empty; give a start below the end"),
    (_frames(9, 64, 96), 0.3, 0.1, None, r"span \[0.3, 0.1\) s is empty"),
    (torch.zeros(0, 64, 96, 3), 0.0, 0.1, None, r"is empty; give at least one frame"),
    (_frames(12, 64, 96), 0.0, 0.1, None, r"has 12 frames; the frame count must be 8k\+1.*keep the first 9"),
    (_frames(9, 60, 96), 0.0, 0.1, None, r"is 96x60; width and height must be multiples of 32"),
    (_frames(9, 64, 96), 0.0, 0.1, {"waveform": torch.zeros(1, 2, 0), "sample_rate": 16000}, r"has no samples"),
    (_frames(9, 64, 96), 0.0, 0.1, {"waveform": torch.zeros(2, 100)}, r"ComfyUI AUDIO with a waveform"),
])
def test_a_bad_retake_is_refused_when_the_node_runs(images, start, end, audio, match):
    with pytest.raises(ValueError, match=match):
        node("LTX2Retake", images, 24.0, start, end, False, False, audio=audio)


def test_a_retake_keeping_everything_or_in_two_stages_is_refused(loaded):
    model, encoder, _, _ = loaded
    with pytest.raises(ValueError, match=r"keeps both the video and the audio"):
        node("LTX2Retake", _frames(9, 64, 96), 24.0, 0.0, 0.1, True, True, audio=_sound(0.5))
    (retake,) = node("LTX2Retake", _frames(9, 64, 96), 24.0, 0.0, 0.1, False, False)
    with pytest.raises(ValueError, match=r"a retake runs one stage"):
        node("LTX2Generate", model, encoder, "a", negative_prompt="", mode="two-stage", width=128, height=64,
             frames=9, fps=24.0, seed=1, steps=2, retake=retake)


def test_a_guide_with_an_attention_strength_and_mask_runs_as_the_pipeline(loaded, ic_lora):
    """Attention strength 0.5 and a ComfyUI MASK (longer than the clip: its first frames used, as a file's): the
    sampler equals the pipeline's request with the same control; a bad mask is refused when the node runs."""
    _, encoder, conditioning, guidance = loaded
    depth = _frames(9)
    mask = torch.zeros(13, 64, 128)
    mask[:, :, :64] = 1.0  # attend to the left half only
    (guides,) = node("LTX2VideoGuide", depth, 1.0, 0.5, attention_mask=mask)
    (latent,) = node("LTX2EmptyLatent", 128, 64, 9, 24.0)
    (out,) = node("LTX2Sampler", ic_lora, conditioning, latent, 4, 2, "ltx2", guidance=guidance, guides=guides)
    control = ControlCondition(VideoFrames(depth, 24.0), 1.0, 2, 0.5, mask[:9])
    request = Request("a", width=128, height=64, frames=9, steps=2, seed=4, video_guidance=guidance[0],
                      audio_guidance=guidance[1], controls=(control,))
    models = Models(ic_lora.host.transformer, encoder, ic_lora.decoders, video_encoder=ic_lora.video_encoder)
    with ic_lora.host.sampler(ic_lora.loras) as (sampler, _):
        want, _ = sample_request(request, models, conditioning.positive, conditioning.negative, sampler=sampler)
    torch.testing.assert_close(out.video, want.video, atol=1e-6, rtol=0)
    (full,) = node("LTX2VideoGuide", depth, 1.0, 1.0)
    (unweighted,) = node("LTX2Sampler", ic_lora, conditioning, latent, 4, 2, "ltx2", guidance=guidance, guides=full)
    assert (unweighted.video - out.video).abs().max() > 1e-4  # the weights act
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        node("LTX2VideoGuide", depth, 1.0, 0.5, attention_mask=mask * 2)
