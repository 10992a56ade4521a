"""Every node called without ComfyUI (file inputs are paths there) on tiny real files: a checkpoint, ComfyUI's
Gemma file, an upsampler and LoRAs. The graphs produce ComfyUI IMAGE frames and AUDIO of the requested size."""

from __future__ import annotations

import pytest
import torch

from support.node_calls import node


def _check_outputs(images, audio, fps, frames, height, width):
    assert images.shape == (frames, height, width, 3) and images.dtype == torch.float32
    assert 0 <= images.min() and images.max() <= 1
    assert audio["waveform"].shape[:2] == (1, 2) and audio["sample_rate"] == 24000
    assert abs(audio["waveform"].shape[-1] / audio["sample_rate"] - frames / fps) < 0.1 and fps == 24.0


def test_one_stage_graph(loaded):
    model, _, conditioning, guidance = loaded
    assert guidance[0].stg_blocks == (2,) and guidance[1].stg_blocks == (1,)  # auto: the last of 3 blocks
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    (latent,) = node("LTX2Sampler", model, conditioning, latent, 5, 2, "ltx2", guidance=guidance)
    assert latent.video.shape == (1, 128, 2, 2, 3) and latent.pixel_size == (9, 64, 96)
    _check_outputs(*node("LTX2Decode", model, latent, 512, 64), frames=9, height=64, width=96)


def test_two_stage_graph_with_upsampler_and_distilled_lora(loaded, files):
    model, _, conditioning, guidance = loaded
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], model)
    (latent,) = node("LTX2EmptyLatent", 64, 32, 9, 24.0)
    (latent,) = node("LTX2Sampler", model, conditioning, latent, 1, 2, "ltx2", guidance=guidance)
    (latent,) = node("LTX2LatentUpsample", model, upsampler, latent)
    (refiner,) = node("LTX2LoraLoader", model, files["distilled"], 1.0)
    (latent,) = node("LTX2Sampler", refiner, conditioning, latent, 1, 3, "stage-2 refine")
    _check_outputs(*node("LTX2Decode", model, latent, 0, 0), frames=9, height=64, width=128)


def test_a_lora_switched_off_gives_the_original_latents_and_leaves_the_model_alone(loaded, files):
    model, _, conditioning, guidance = loaded
    weights = {k: v.clone() for k, v in model.host.transformer.state_dict().items()}
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)

    def run(handle):
        return node("LTX2Sampler", handle, conditioning, latent, 7, 2, "ltx2", guidance=guidance)[0]

    before = run(model)
    (styled,) = node("LTX2LoraLoader", model, files["style"], 0.8)
    with_lora = run(styled)
    after = run(model)
    assert (with_lora.video - before.video).abs().max() > 1e-3  # the LoRA was applied
    # the acceptance criterion is bit-identity: the weights are restored in place bit for bit and the same
    # kernels run on the same data in this process
    assert torch.equal(after.video, before.video) and torch.equal(after.audio, before.audio)
    for name, value in model.host.transformer.state_dict().items():
        assert torch.equal(value, weights[name]), name  # restored copies
    assert model.loras == () and len(styled.loras) == 1


def test_generate_node_one_stage_and_two_stage(loaded, files):
    model, encoder, _, _ = loaded
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], model)
    common = dict(negative_prompt="blurry", frames=9, fps=24.0, seed=3, steps=2)
    outputs = node("LTX2Generate", model, encoder, "a cat on a beach", mode="one-stage", width=96, height=64, **common)
    _check_outputs(*outputs, frames=9, height=64, width=96)
    outputs = node("LTX2Generate", model, encoder, "a cat on a beach", mode="two-stage", width=128, height=64,
                   upsampler=upsampler, distilled_lora=files["distilled"], **common)
    _check_outputs(*outputs, frames=9, height=64, width=128)


def test_run_time_errors_name_the_fix(loaded):
    model, _, conditioning, guidance = loaded
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    with pytest.raises(ValueError, match="outside this model's blocks 0..2"):
        node("LTX2Guidance", model, cfg=3.0, stg=1.0, rescale=0.7, modality=3.0, stg_blocks="29", audio_cfg=7.0,
             audio_stg=1.0, audio_rescale=0.7, audio_modality=3.0, audio_stg_blocks="auto")
    with pytest.raises(ValueError, match="CUDA options"):
        node("LTX2Sampler", model, conditioning, latent, 0, 2, "ltx2", compile=True)
    with pytest.raises(ValueError, match="fall strictly"):
        node("LTX2Sampler", model, conditioning, latent, 0, 2, "ltx2", sigmas="1.0, 0.5, 0.7, 0.0")
    with pytest.raises(FileNotFoundError, match="outside ComfyUI a model input is a path"):
        node("LTX2LoraLoader", model, "missing.safetensors", 1.0)


def test_loading_another_checkpoint_releases_the_previous_model(files, tiny_checkpoints, loaded):
    _, _, conditioning, _ = loaded
    (first,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", unique_id="7")
    (second,) = node("LTX2CheckpointLoader", str(tiny_checkpoints["2.3"]), "auto", "cpu", unique_id="7")
    assert all(p.is_meta for module in first.modules() for p in module.parameters())
    assert not any(p.is_meta for module in second.modules() for p in module.parameters())
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    with pytest.raises(ValueError, match="released when its loader node loaded another checkpoint"):
        node("LTX2Sampler", first, conditioning, latent, 0, 2, "ltx2")


def test_the_loaders_fp8_matmul_input_sets_how_fp8_weights_multiply(files):
    (model,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", fp8="quantize", fp8_matmul="row",
                    unique_id="fp8-matmul-test")
    assert {m.recipe for top in model.modules() for m in top.modules() if hasattr(m, "recipe")} == {"row"}


def test_a_streaming_loader_samples_what_the_resident_one_does(loaded, files):
    """memory=stream: every block in host memory, copied to the device slot by slot; the same latents."""
    here, _, conditioning, guidance = loaded
    (streamed,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", memory="stream",
                       unique_id="streaming-test")
    assert streamed.streamed and streamed.memory.resident_blocks == 0
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    want, got = (node("LTX2Sampler", m, conditioning, latent, 3, 2, "ltx2", guidance=guidance)[0]
                 for m in (here, streamed))
    torch.testing.assert_close(got.video, want.video, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.audio, want.audio, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="CUDA options"):
        node("LTX2Sampler", streamed, conditioning, latent, 3, 2, "ltx2", compile=True)


def test_image_conditions_chain_into_the_sampler_and_the_generate_node(loaded, files):
    """LTX2ImageCondition: frame 0 held exactly at strength 1 (its latent is the encoded picture), -1 the last
    frame; the generate node takes the same chain."""
    from ltx2_core.conditioning.images import encode_conditions
    from nodes.images import at_frames

    model, encoder, conditioning, guidance = loaded
    picture = torch.linspace(0, 1, 48 * 64 * 3).reshape(1, 48, 64, 3)
    (first,) = node("LTX2ImageCondition", picture, 0, 1.0, 0)
    (both,) = node("LTX2ImageCondition", picture.flip(1), -1, 0.8, 33, images=first)
    assert [(i.frame, i.strength, i.crf) for i in both] == [(0, 1.0, 0), (-1, 0.8, 33)]
    (auto,) = node("LTX2ImageCondition", picture, 0, 1.0, -1)  # the widget's default: the model's CRF
    assert auto[0].crf is None
    (latent,) = node("LTX2EmptyLatent", 96, 64, 17, 24.0)
    (out,) = node("LTX2Sampler", model, conditioning, latent, 3, 2, "ltx2", guidance=guidance, images=both)
    encoded = encode_conditions(at_frames(both, 17), model.video_encoder, 64, 96)[0]  # the same batch of two
    assert torch.equal(out.video[:, :, :1], encoded.latent)  # pure copy: mask 0 keeps the clean tokens
    (free,) = node("LTX2Sampler", model, conditioning, latent, 3, 2, "ltx2", guidance=guidance)
    assert (free.video[:, :, -1] - out.video[:, :, -1]).abs().max() > 1e-3  # the last frame was guided
    images, audio, fps = node("LTX2Generate", model, encoder, "a cat", negative_prompt="blurry", mode="one-stage",
                              width=96, height=64, frames=17, fps=24.0, seed=1, steps=2, images=both)
    assert images.shape == (17, 64, 96, 3)
    with pytest.raises(ValueError, match="pixel frame index in 0..16"):
        node("LTX2Sampler", model, conditioning, latent, 3, 2, "ltx2",
             images=node("LTX2ImageCondition", picture, 40, 1.0, 0)[0])


def test_keyframes_chain_into_the_sampler_and_the_generate_nodes_mode(loaded, files):
    """LTX2ImageCondition's keyframe: a frame-0 image appended (its frame generated, not held) in a sampler chain;
    the generate node's mode keyframes (Lightricks' KeyframeInterpolation pipeline) with two images, and one image
    refused when queued and when run, naming the fix."""
    from nodes.generate import LTX2Generate

    model, encoder, conditioning, guidance = loaded
    picture = torch.linspace(0, 1, 48 * 64 * 3).reshape(1, 48, 64, 3)
    (held,) = node("LTX2ImageCondition", picture, 0, 1.0, 0)
    (keyed,) = node("LTX2ImageCondition", picture, 0, 1.0, 0, keyframe=True)
    assert not held[0].keyframe and keyed[0].keyframe
    (latent,) = node("LTX2EmptyLatent", 96, 64, 17, 24.0)
    (out_held,) = node("LTX2Sampler", model, conditioning, latent, 3, 2, "ltx2", guidance=guidance, images=held)
    (out_keyed,) = node("LTX2Sampler", model, conditioning, latent, 3, 2, "ltx2", guidance=guidance, images=keyed)
    assert (out_keyed.video[:, :, :1] - out_held.video[:, :, :1]).abs().max() > 1e-3  # generated, not held
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], model)
    (two,) = node("LTX2ImageCondition", picture.flip(1), 16, 0.8, 0, images=held)
    common = dict(negative_prompt="blurry", mode="keyframes", width=128, height=64, frames=17, fps=24.0, seed=1,
                  steps=2, upsampler=upsampler, distilled_lora=files["distilled"])
    images, audio, fps = node("LTX2Generate", model, encoder, "a cat", images=two, **common)
    assert images.shape == (17, 64, 128, 3)
    with pytest.raises(ValueError, match="at least two images"):
        node("LTX2Generate", model, encoder, "a cat", images=held, **common)
    queued = LTX2Generate.VALIDATE_INPUTS("a cat", "blurry", "keyframes", 128, 64, 17, 24.0, 2, files["distilled"],
                                          input_types={"upsampler": "LTX2_UPSAMPLER"})
    assert "at least two images" in queued
def test_the_sampler_and_generate_nodes_take_res2s_and_two_stage_hq(loaded, files):
    """LTX-2 Sampler's `sampler` res_2s (another result than euler on the same seed) and LTX-2 Generate's
    two-stage-hq mode (res_2s by default) with its refusals naming the fix."""
    from nodes.generate import LTX2Generate

    model, encoder, conditioning, guidance = loaded
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    (euler,) = node("LTX2Sampler", model, conditioning, latent, 5, 2, "ltx2", guidance=guidance)
    (res2s,) = node("LTX2Sampler", model, conditioning, latent, 5, 2, "ltx2", guidance=guidance, sampler="res_2s")
    assert res2s.video.shape == euler.video.shape and (res2s.video - euler.video).abs().max() > 1e-3
    for options, fix in (({"schedule": "distilled"}, "set sampler to euler"),
                         ({"cuda_graphs": "on"}, "set cuda_graphs to auto"),
                         ({"cache": object()}, "run it without the cache")):
        arguments = {"schedule": "ltx2", **options}
        with pytest.raises(ValueError, match=fix):
            node("LTX2Sampler", model, conditioning, latent, 5, 2, arguments.pop("schedule"), sampler="res_2s",
                 **arguments)
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], model)
    outputs = node("LTX2Generate", model, encoder, "a cat on a beach", mode="two-stage-hq", width=128, height=64,
                   negative_prompt="blurry", frames=9, fps=24.0, seed=3, steps=2, upsampler=upsampler,
                   distilled_lora=files["distilled"])
    _check_outputs(*outputs, frames=9, height=64, width=128)
    assert "set sampler to euler" in LTX2Generate.VALIDATE_INPUTS(mode="distilled", sampler="res_2s")
    queued = dict(prompt="a cat", negative_prompt="", mode="two-stage-hq", width=128, height=64, frames=9, fps=24.0,
                  steps=0, audio_only=False, input_types={"upsampler": "LTX2_UPSAMPLER"})
    assert LTX2Generate.VALIDATE_INPUTS(**queued).startswith("distilled_lora: the two-stage-hq pipeline needs")
    assert "multiples of 64" in LTX2Generate.VALIDATE_INPUTS(**{**queued, "width": 96})
