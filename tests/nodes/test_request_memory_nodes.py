"""Every node that allocates a clip's memory counts all of it (`ltx2_core.memory.footprint`) against what is free
before it allocates anything, and refuses with the numbers and the nearest size that fits. On main LTX-2 Empty
Latent made its 6 GB latent unchecked and the generate node counted one forward's activations alone."""

from __future__ import annotations

import re

import pytest
from support.node_calls import node

from ltx2_core.memory import request_check
from ltx2_core.memory.plan import MemoryPlanError

LIMIT = "the process's RLIMIT_DATA limit of 0.1 GB"
SIZE = {"width": 96, "height": 64, "frames": 9}
GENERATE = {"negative_prompt": "", "mode": "one-stage", "fps": 24.0, "seed": 1, "steps": 2}


def _nothing_allocated(*_args, **_kwargs):
    raise AssertionError("allocated before the memory check")


@pytest.fixture
def made(loaded, files):
    """A 96x64x9 latent, sampled, and an upsampler: made with the RAM that is free."""
    model, _, conditioning, _ = loaded
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    (sampled,) = node("LTX2Sampler", model, conditioning, latent, 0, 2, "ltx2")
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], model)
    return latent, sampled, upsampler


def _calls(loaded, made):
    """(node, the allocating function it must not reach, its call) for each node that allocates a clip."""
    model, encoder, conditioning, guidance = loaded
    latent, sampled, upsampler = made
    return {
        "LTX2EmptyLatent": ("nodes.sampling.empty_latent", lambda: node("LTX2EmptyLatent", 96, 64, 9, 24.0)),
        "LTX2Sampler": ("nodes.sampling.encode_images",
                        lambda: node("LTX2Sampler", model, conditioning, latent, 0, 2, "ltx2", guidance)),
        "LTX2LatentUpsample": ("nodes.decode.upsample", lambda: node("LTX2LatentUpsample", model, upsampler,
                                                                     sampled)),
        "LTX2Decode": ("nodes.decode.decode", lambda: node("LTX2Decode", model, sampled, 512, 64)),
        "LTX2Generate": ("nodes.generate.generate", lambda: node("LTX2Generate", model, encoder, "a cat", **SIZE,
                                                                 **GENERATE)),
        "LTX2GenerateLong": ("nodes.long_video.generate_long", lambda: node(
            "LTX2GenerateLong", model, encoder, "a train", width=64, height=64, duration=2.0, window=25, overlap=8,
            **GENERATE)),
    }


@pytest.mark.parametrize("name", ["LTX2EmptyLatent", "LTX2Sampler", "LTX2LatentUpsample", "LTX2Decode",
                                  "LTX2Generate", "LTX2GenerateLong"])
def test_a_node_refuses_what_cannot_fit_before_it_allocates_anything(loaded, made, monkeypatch, name):
    target, call = _calls(loaded, made)[name]
    monkeypatch.setattr(request_check, "host_room", lambda: (1000, LIMIT))  # a CPU model: its device is the host
    monkeypatch.setattr(target, _nothing_allocated)
    with pytest.raises(MemoryPlanError) as caught:
        call()
    message = str(caught.value)
    assert "needs" in message and "of RAM while" in message and f"is free ({LIMIT})" in message, message
    assert message.endswith("free memory (close other programs, unload other models) first"), message


def test_what_fits_runs_and_an_unknown_room_refuses_nothing(loaded, made, monkeypatch):
    """The same calls with 64 GB free, or with the free memory unknown (None): nothing refused."""
    for room in ((64 * 10**9, "RAM available"), (None, "")):
        monkeypatch.setattr(request_check, "host_room", lambda room=room: room)
        (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
        assert latent["samples"] is not None


def test_the_refusal_names_the_largest_clip_that_fits(loaded, monkeypatch):
    """With room for a few frames' worth, the generate node names fewer frames at this size and a smaller size
    at this length; each then passes its check (it reaches the generation) and one step more does not."""
    model, encoder, _, _ = loaded
    monkeypatch.setattr(request_check, "host_room", lambda: (400 * 10**6, LIMIT))
    monkeypatch.setattr("nodes.generate.generate", _nothing_allocated)
    generate = lambda width, height, frames: node("LTX2Generate", model, encoder, "a cat", width=width,
                                                 height=height, frames=frames, **GENERATE)
    with pytest.raises(MemoryPlanError) as caught:
        generate(1024, 1024, 121)
    found = re.search(r"^1024x1024, 121 frames needs .* of RAM while (decoding|making the frames) .*; (\d+) frames? "
                      r"\(.* s\) at this size or (\d+)x(\d+) at this length would fit; lower the frames, width or "
                      r"height$", str(caught.value))
    assert found, caught.value
    frames, width, height = (int(v) for v in found.groups()[1:])
    for fits, too_many in (((1024, 1024, frames), (1024, 1024, frames + 8)),
                           ((width, height, 121), (width + 32, height * (width + 32) // width // 32 * 32, 121))):
        with pytest.raises(AssertionError, match="allocated before the memory check"):
            generate(*fits)  # passed its check
        with pytest.raises(MemoryPlanError):
            generate(*too_many)
