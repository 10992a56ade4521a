"""ComfyUI's native LTX-2 LATENT and ours, both ways (nodes/interop.py): the dicts native nodes make (built here as
EmptyLTXVLatentVideo, LTXVEmptyLatentAudio and LTXVConcatAVLatent build them, with a NestedTensor equivalent), the
round trips, the refusals, and our sampler / upsampler / decoder fed a native latent."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.audio_io import Waveform
from ltx2_core.stages import AVLatent, empty_latent
from nodes import bridge
from nodes.interop import (FPS_KEY, SOUND_KEY, Latent, clip_fps, from_comfy, is_nested, mask_conditions, split,
                           to_comfy)
from support.node_calls import node


class FakeNested:
    """ComfyUI's comfy.nested_tensor.NestedTensor as far as the pack reads it (its `tensors` list)."""

    def __init__(self, tensors):
        self.tensors = list(tensors)
        self.is_nested = True

    def unbind(self):
        return self.tensors


def native_av(frames=9, height=64, width=96, fps=24, audio_latents=None, mask=False) -> dict:
    """EmptyLTXVLatentVideo + LTXVEmptyLatentAudio (ceil(frames / fps · 25) latents) + LTXVConcatAVLatent."""
    video = {"samples": torch.randn(1, 128, (frames - 1) // 8 + 1, height // 32, width // 32),
             "downscale_ratio_spacial": 32}
    length = audio_latents if audio_latents is not None else -(-frames * 25 // fps)
    audio = {"samples": torch.randn(1, 8, length, 16), "type": "audio"}
    out = {**video, **audio, "samples": FakeNested((video["samples"], audio["samples"]))}
    if mask:
        out["noise_mask"] = FakeNested((torch.ones_like(video["samples"]), torch.ones_like(audio["samples"])))
    return out


def test_a_native_latent_becomes_ours_and_back_with_the_same_tensors():
    native = native_av(frames=121, fps=24)
    video, audio = native["samples"].tensors
    ours = from_comfy(native)
    # pure re-wrapping: the very tensors, so equality is exact
    assert ours.video is video and ours.audio is audio and ours.sound is None
    assert ours.fps == 24.0 and ours.pixel_size == (121, 64, 96)  # 127 audio latents = ceil(121 / 24 · 25)
    back = to_comfy(ours, like=native)
    assert is_nested(back["samples"]) and back["samples"].tensors[0] is video and back["samples"].tensors[1] is audio
    assert back["downscale_ratio_spacial"] == 32 and back[FPS_KEY] == 24.0 and "type" not in back


def test_our_latent_round_trips_with_its_fps_and_held_sound():
    latent = empty_latent(96, 64, 17, 25.0)
    sound = Waveform(torch.rand(2, 16000) - 0.5, 16000)
    held = latent._replace(sound=sound)
    out = to_comfy(held)
    assert isinstance(out, Latent) and set(out) == {"samples", FPS_KEY, SOUND_KEY}
    again = from_comfy(dict(out))  # a native node's copy: a plain dict with our keys
    assert again.video is held.video and again.audio is held.audio and again.fps == 25.0
    assert again.sound is sound and out.sound is sound and out.pixel_size == (17, 64, 96)
    assert torch.equal(out.video, held.video)  # the Latent reads as our AVLatent


def test_the_held_sound_is_dropped_once_a_native_node_changes_the_audio():
    held = empty_latent(96, 64, 9, 24.0)._replace(sound=Waveform(torch.zeros(1, 100), 16000))
    out = dict(to_comfy(held))
    video, audio = out["samples"].tensors
    out["samples"] = FakeNested((video, audio + 1))  # e.g. a native sampler's new audio
    assert from_comfy(out).sound is None and from_comfy(out).fps == 24.0


def test_audio_only_and_video_only_latents():
    audio = {"samples": torch.randn(2, 8, 30, 16), "type": "audio"}  # LTXVEmptyLatentAudio
    ours = from_comfy(audio)
    assert ours.video is None and ours.audio is audio["samples"]
    back = to_comfy(ours)
    assert back["samples"] is audio["samples"] and back["type"] == "audio"
    untyped = {"samples": torch.randn(1, 8, 30, 16)}  # LTXVSeparateAVLatent's or Load Latent's audio: no "type"
    assert from_comfy(untyped).video is None and from_comfy(untyped).audio is untyped["samples"]
    video = {"samples": torch.randn(1, 128, 2, 2, 3), "downscale_ratio_spacial": 32}  # EmptyLTXVLatentVideo
    with pytest.raises(ValueError, match="LTXVEmptyLatentAudio.*LTXVConcatAVLatent"):
        from_comfy(video)
    taken = from_comfy(video, video_only=True)  # the upsampler's reading
    assert taken.video is video["samples"] and taken.audio.shape == (1, 8, 0, 16)
    back = to_comfy(taken, like=video)
    assert back["samples"] is video["samples"] and FPS_KEY not in back and back["downscale_ratio_spacial"] == 32


@pytest.mark.parametrize("latent, words", [
    ({"samples": torch.zeros(1, 4, 8, 8)}, "not an LTX-2 latent"),  # an image latent
    ({"samples": torch.zeros(1, 16, 2, 2, 3)}, "video latent is"),
    ({"samples": FakeNested((torch.zeros(1, 128, 2, 2, 3), torch.zeros(1, 8, 9, 8)))}, "audio latent is"),
    ({"samples": FakeNested((torch.zeros(2, 128, 2, 2, 3), torch.zeros(1, 8, 9, 16)))}, "same batch_size"),
    ({"samples": FakeNested((torch.zeros(1, 128, 2, 2, 3),))}, "LTXVConcatAVLatent"),
    (torch.zeros(1, 128, 2, 2, 3), "ComfyUI's LATENT"),
])
def test_what_is_not_an_ltx2_latent_is_refused_naming_the_fix(latent, words):
    with pytest.raises(ValueError, match=words):
        split(latent)


@pytest.mark.parametrize("frames, fps", [(121, 24), (121, 25), (97, 25), (241, 30), (9, 24), (49, 48)])
def test_a_native_latent_fps_is_read_from_its_audio_length(frames, fps):
    native = -(-frames * 25 // fps)  # LTXVEmptyLatentAudio: ceil(frames / frame_rate · 25)
    assert clip_fps(frames, native) == fps
    assert clip_fps(frames, round(frames / fps * 25)) == fps  # ours rounds
    assert abs(clip_fps(121, 77) - 121 * 25 / 77) < 1e-9  # no common rate fits: as long as the video


def test_the_stand_in_nested_tensor_outside_comfyui():
    nested = bridge.nested_tensor((torch.zeros(1, 128, 2, 2, 3), torch.zeros(1, 8, 9, 16)))
    assert is_nested(nested) and nested.shape == (1, 128, 2, 2, 3) and len(nested.unbind()) == 2
    assert not is_nested(torch.zeros(3))


def test_the_sampler_takes_a_native_latent_as_ours_and_gives_one_native_nodes_split(loaded, files):
    model, _, conditioning, guidance = loaded
    (ours,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    native = native_av(9, 64, 96, fps=24, mask=True)  # an all-ones mask (LTXVConcatAVLatent's): allowed
    native["samples"] = FakeNested((torch.zeros_like(ours.video), torch.zeros(1, 8, 10, 16)))
    same = AVLatent(torch.zeros_like(ours.video), torch.zeros(1, 8, 10, 16), 24.0)  # ceil(9 / 24 · 25) = 10
    (want,) = node("LTX2Sampler", model, conditioning, same, 5, 2, "ltx2", guidance=guidance)
    (got,) = node("LTX2Sampler", model, conditioning, native, 5, 2, "ltx2", guidance=guidance)
    assert got.fps == 24.0 and got["downscale_ratio_spacial"] == 32 and "noise_mask" not in got
    # the same computation on the same zeros in this process: bit-identical
    assert torch.equal(got.video, want.video) and torch.equal(got.audio, want.audio)
    video, audio = got["samples"].unbind()  # what LTXVSeparateAVLatent does
    assert video.shape == (1, 128, 2, 2, 3) and audio.shape == (1, 8, 10, 16)
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], model)
    (bigger,) = node("LTX2LatentUpsample", model, upsampler, {"samples": video})  # video-only, as separated
    assert bigger["samples"].shape == (1, 128, 2, 4, 6) and FPS_KEY not in bigger
    images, sound, fps = node("LTX2Decode", model, dict(got), 0, 0)  # a native node's copy of our dict
    assert images.shape == (9, 64, 96, 3) and fps == 24.0 and sound["waveform"].shape[:2] == (1, 2)


def _image_to_video(strength: float) -> dict:
    """What LTXVImgToVideoInplace + LTXVConcatAVLatent give: an image's latent in frame 0, its mask 1 − strength."""
    latent = native_av(9, 64, 96)
    video, audio = latent["samples"].tensors
    mask = torch.ones(1, 1, video.shape[2], 1, 1)
    mask[:, :, 0] = 1.0 - strength
    latent["noise_mask"] = FakeNested((mask, torch.ones_like(audio)))
    return latent


def test_ltxv_img_to_video_masks_become_our_held_first_frame():
    latent = _image_to_video(0.8)
    (held,) = mask_conditions(latent)
    assert held.frame == 0 and abs(held.strength - 0.8) < 1e-6
    assert held.latent.data_ptr() == latent["samples"].tensors[0].data_ptr()  # the latent's own frame, not a copy
    assert mask_conditions(native_av(9, 64, 96, mask=True)) == [] and mask_conditions(native_av(9, 64, 96)) == []


def test_the_sampler_holds_an_img_to_video_frame_and_refuses_other_masks(loaded):
    model, _, conditioning, _ = loaded
    latent = _image_to_video(1.0)
    (got,) = node("LTX2Sampler", model, conditioning, latent, 5, 2, "ltx2")
    given = latent["samples"].tensors[0]
    # strength 1: the first latent frame is held exactly (restored, not computed), the others are sampled
    assert torch.equal(got.video[:, :, 0], given[:, :, 0])
    assert (got.video[:, :, 1:] - given[:, :, 1:]).abs().max() > 1e-2
    spatial, later, audio = _image_to_video(1.0), _image_to_video(1.0), _image_to_video(1.0)
    spatial["noise_mask"].tensors[0] = torch.ones(1, 1, 2, 2, 3)
    spatial["noise_mask"].tensors[0][..., 0, 0] = 0  # Set Latent Noise Mask's kind: a region
    later["noise_mask"].tensors[0] = torch.tensor([1.0, 0.0]).view(1, 1, 2, 1, 1)  # a frame past the start
    audio["noise_mask"].tensors[1] = torch.zeros_like(audio["noise_mask"].tensors[1])
    for masked, why in ((spatial, "first frames at one strength"), (later, "first frames at one strength"),
                        (audio, "LTX-2 Audio Condition")):
        with pytest.raises(ValueError, match=f"noise mask.*{why}.*LTX-2 Image Condition"):
            node("LTX2Sampler", model, conditioning, masked, 5, 2, "ltx2")
    video = latent["samples"].tensors[0]
    with pytest.raises(ValueError, match="video-only.*LTXVEmptyLatentAudio"):
        node("LTX2Sampler", model, conditioning, {"samples": video}, 5, 2, "ltx2")
