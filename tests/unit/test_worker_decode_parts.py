"""The caller's side of the decode on workers, without workers: what the memory check counts when the video's tiles
are decoded elsewhere, which host spreads the decode, and how the decoders' weights are told apart."""

from __future__ import annotations

import copy

import torch

from ltx2_core import ModelFiles
from ltx2_core.demo import demo_decoders, demo_transformer
from ltx2_core.hosts import LocalHost, WorkerHost
from ltx2_core.memory.footprint import Job, ModelSizes, request_memory
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import Controller, WorkerDecode
from ltx2_core.runtime.decode_task import Signature


def _decoding(sizes: ModelSizes) -> dict[str, tuple[int, bool]]:
    (stage, parts), = request_memory(Job(121, 512, 768, stages=("decoding",)), sizes).stages
    return {part.name: (part.bytes, part.on_device) for part in parts}


def test_decoded_on_workers_the_caller_counts_the_received_video_and_the_sound_not_a_tile():
    here, there = _decoding(ModelSizes()), _decoding(ModelSizes(decoding_here=False))
    video = 12 * 121 * 512 * 768  # float32 RGB
    assert here["a decode tile's activations"][0] > 0 and "a decode tile's activations" not in there
    assert there["the decoded video"] == there["the received video's shared copy"] == (video, False)
    assert there["the audio decoder's activations"] == here["the audio decoder's activations"]
    device = [sum(b for b, on in parts.values() if on) for parts in (here, there)]
    assert device[1] == here["the audio decoder's activations"][0] < device[0]


def test_only_a_host_with_workers_spreads_the_decode_and_leaves_its_tiles_out_of_the_check(monkeypatch):
    from ltx2_core import hosts

    assert LocalHost(demo_transformer(), "cpu", torch.float32).video_decode is None
    controller = Controller(ModelFiles(version="2.0"), ParallelConfig(cfg=2), device_type="cpu")  # not started
    host = WorkerHost(controller)
    assert isinstance(host.video_decode, WorkerDecode) and host.video_decode.controller is controller
    checked = []
    monkeypatch.setattr(hosts, "request_problem", lambda job, sizes, device: checked.append(sizes.decoding_here))
    host.memory_problem(Job(9, 64, 64))
    host.memory_problem(Job(9, 64, 64), video_here=True)  # a decode in this process
    assert checked == [False, True]


def test_a_signature_tells_other_weights_and_dtypes_apart_but_not_a_copy():
    decoder = demo_decoders("2.0").video
    mine = Signature.of(decoder)
    assert mine.matches(Signature.of(copy.deepcopy(decoder))) and mine.describe() == "VideoDecoder in float32"
    assert not mine.matches(Signature.of(demo_decoders("2.0", seed=1).video))
    assert not mine.matches(Signature.of(copy.deepcopy(decoder).double()))
    with torch.no_grad():
        next(decoder.parameters())[0].flatten()[0] += 1e-3  # one weight of millions
    assert not mine.matches(Signature.of(decoder))


def test_the_callers_signature_is_computed_once_until_a_weight_changes(monkeypatch):
    decoder = demo_decoders("2.0").video
    calls = []
    original = Signature.of.__func__
    monkeypatch.setattr(Signature, "of", classmethod(lambda cls, d: calls.append(d) or original(cls, d)))
    first = Signature.cached(decoder)
    assert Signature.cached(decoder) is first and len(calls) == 1  # the second decode reads no weight
    with torch.no_grad():
        next(decoder.parameters()).add_(1.0)  # changed in place: its version counter moves
    assert not Signature.cached(decoder).matches(first) and len(calls) == 2
    name, weight = next(decoder.named_parameters())
    module, _, leaf = name.rpartition(".")
    replaced = torch.nn.Parameter(weight.detach() * 2)  # replaced, as ComfyUI's weight patching does: a new storage
    setattr(decoder.get_submodule(module), leaf, replaced)
    assert not Signature.cached(decoder).matches(first) and len(calls) == 3


def test_a_decoder_loaded_in_inference_mode_is_fingerprinted_at_every_call():
    """ComfyUI runs nodes under `torch.inference_mode`: the loaded decoder's weights are inference tensors, which keep
    no version counter (the e2e two-GPU workflows failed on `_version`) and can be written in place there."""
    with torch.inference_mode():
        decoder = demo_decoders("2.0").video
    first = Signature.cached(decoder)
    assert first.matches(Signature.of(decoder))
    with torch.inference_mode():
        next(decoder.parameters()).add_(1.0)
    assert not Signature.cached(decoder).matches(first)
