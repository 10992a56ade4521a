"""LTX-2 DFR (long clip) on the tiny LTX-2.5 release with a keyframe-slot dev transformer: the node runs the
pipeline's DFR request (its frames and sound equal `dfr_pipeline.generate_dfr` on the same request and conditioning;
one temporal round: (N - 1)·2 + 1 frames at twice the rate, with the detailing IC-LoRA), the upsampler loader takes
the temporal file too, and the refusals name their fix before any sampling: rounds without the temporal upsampler
(when queued and when run), the upsamplers swapped, a transformer without the keyframe embedding, an IC-LoRA on the
model, DFR's sizes and frames. On two sequence-parallel workers it gives what it gives here."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ltx2_core import Models, Request, TransformerConfig, load_lora
from ltx2_core.demo import demo_transformer
from ltx2_core.dfr import DFR
from ltx2_core.dfr_pipeline import check_dfr_models, generate_dfr
from ltx2_core.pipeline import LocalSampler
from nodes.dfr import LTX2DFR
from nodes.handles import CONDITIONING, MODEL, UPSAMPLER
from support.model_files import write_lora, write_temporal_upsampler
from support.node_calls import node
from support.release25 import write_release25
from support.transformer25 import write_transformer25

SIZE, FRAMES, SEED = 128, 17, 3


@pytest.fixture(scope="module")
def dfr(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dfr_node")
    paths = {field: str(path) for field, path in write_release25(folder / "models").items()}
    config = dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True)
    write_transformer25(paths["dev"], demo_transformer(config, seed=3).state_dict(), config)
    paths["temporal"] = str(write_temporal_upsampler(folder / "temporal.safetensors"))
    paths["detailing"] = str(write_lora(folder / "detailing.safetensors", seed=8, version="2.5",
                                        metadata={"reference_downscale_factor": "2"}))
    (model,) = node("LTX2ModelLoader", paths["dev"], paths["vae"], paths["audio_vae"], "auto", "cpu")
    (encoder,) = node("LTX2TextEncoderLoader", paths["text_encoder"], model, "cpu", False)
    conditioning = node("LTX2TextEncode", encoder, "a long walk along the shore at dusk", "")[0]
    (upsampler,) = node("LTX2UpsamplerLoader", paths["upsampler"], model)
    (temporal,) = node("LTX2UpsamplerLoader", paths["temporal"], model)  # the same loader, told by the header
    return paths, model, conditioning, upsampler, temporal


def _run(dfr, **overrides):
    paths, model, conditioning, upsampler, temporal = dfr
    inputs = dict(model=model, conditioning=conditioning, upsampler=upsampler, distilled_lora=paths["distilled_lora"],
                  width=SIZE, height=SIZE, frames=FRAMES, fps=24.0, seed=SEED, temporal_rounds=1,
                  temporal_upsampler=temporal, detailing_lora=paths["detailing"], detailing_strength=0.9)
    return node("LTX2DFR", **{**inputs, **overrides})


@pytest.fixture(scope="module")
def here(dfr):
    """The node's outputs with the default inputs (one round, the detailing LoRA) on the model in this process."""
    return _run(dfr)


def test_the_node_runs_the_pipelines_dfr_request(dfr, here):
    paths, model, conditioning, upsampler, temporal = dfr
    assert temporal.config.temporal and not upsampler.config.temporal
    frames, audio, fps = here
    assert frames.shape == ((FRAMES - 1) * 2 + 1, SIZE, SIZE, 3) and fps == 48.0
    seconds = audio["waveform"].shape[-1] / audio["sample_rate"]
    assert abs(seconds - frames.shape[0] / fps) < 1e-3  # stage 1's sound cut to the clip
    request = Request("p", width=SIZE, height=SIZE, frames=FRAMES, fps=24.0, seed=SEED, mode="dfr",
                      dfr=DFR(1, paths["detailing"], 0.9))
    models = Models(model.host.transformer, None, model.decoders, upsampler, load_lora(paths["distilled_lora"]),
                    model.video_encoder, temporal_upsampler=temporal)
    expected = generate_dfr(request, models, sampler=LocalSampler(model.host.transformer),
                            tiling=model.host.tiling(), positive=conditioning.positive)
    torch.testing.assert_close(frames, expected.frames, atol=1e-5, rtol=1e-5)  # the same run, twice
    torch.testing.assert_close(audio["waveform"][0], expected.waveform.float(), atol=1e-5, rtol=1e-5)


def test_rounds_without_the_temporal_upsampler_are_refused_when_queued_and_run(dfr):
    paths = dfr[0]
    links = {"model": MODEL, "conditioning": CONDITIONING, "upsampler": UPSAMPLER}  # ComfyUI's: input -> type
    problem = LTX2DFR.VALIDATE_INPUTS(width=SIZE, height=SIZE, frames=FRAMES, fps=24.0, temporal_rounds=1,
                                      distilled_lora=paths["distilled_lora"], input_types=links)
    assert "connect an LTX-2 Latent Upsampler Loader holding the temporal file" in problem
    assert LTX2DFR.VALIDATE_INPUTS(width=SIZE, height=SIZE, frames=FRAMES, fps=24.0, temporal_rounds=1,
                                   distilled_lora=paths["distilled_lora"],
                                   input_types={**links, "temporal_upsampler": UPSAMPLER}) is True
    with pytest.raises(ValueError, match="set temporal_rounds to 0"):
        _run(dfr, temporal_upsampler=None)


@pytest.mark.parametrize("overrides, message", [
    ({"frames": 16}, r"8k\+1"),
    ({"width": 160}, "64"),
    ({"temporal_rounds": 3}, "temporal_rounds must be 0..2"),
    ({"detailing_lora": "../x.safetensors"}, "detailing_lora"),
])
def test_bad_settings_are_refused_naming_the_input(dfr, overrides, message):
    with pytest.raises(ValueError, match=message):
        _run(dfr, **overrides)


def test_swapped_upsamplers_and_wrong_models_are_refused_before_sampling(dfr, monkeypatch):
    paths, model, conditioning, upsampler, temporal = dfr
    monkeypatch.setattr(LocalSampler, "__call__", lambda *a, **k: pytest.fail("sampled before the refusal"))
    with pytest.raises(ValueError, match="the one given is the temporal upsampler"):
        _run(dfr, upsampler=temporal)
    with pytest.raises(ValueError, match="temporal upsampler is a spatial one"):
        _run(dfr, temporal_upsampler=upsampler)
    (plain,) = node("LTX2ModelLoader", paths["distilled"], paths["vae"], paths["audio_vae"], "auto", "cpu")
    with pytest.raises(ValueError, match="use_keyframes_abs_pos_embedding"):
        _run(dfr, model=plain)
    (with_ic,) = node("LTX2LoraLoader", model, paths["detailing"], 1.0)
    with pytest.raises(ValueError, match="pick it in detailing_lora"):
        _run(dfr, model=with_ic)
    request = Request("p", width=SIZE, height=SIZE, frames=FRAMES, mode="dfr", dfr=DFR())
    with pytest.raises(ValueError, match="needs the x2 spatial latent upsampler"):
        check_dfr_models(request, Models(None, None, model.decoders, None, None), model.config)


def test_dfr_on_two_sequence_parallel_workers_gives_what_it_gives_here(dfr, here):
    """The transformer on two CPU worker processes (gloo, Ulysses sp 2): the slots' denoised keyframes come back
    from the workers with each stage's latent (rank 0's reply), the rounds' video-only tiles travel without audio,
    the detailing IC-LoRA is read from its file by each worker for stage 2."""
    paths, model, conditioning, upsampler, temporal = dfr
    (layout,) = node("LTX2ParallelConfig", '{"cfg": 1, "sp": 2, "tp": 1}', 4)
    (spread,) = node("LTX2ModelLoader", paths["dev"], paths["vae"], paths["audio_vae"], "auto", "cpu",
                     parallel=layout, unique_id="dfr-workers")
    try:
        assert spread.host.transformer is None
        there = _run(dfr, model=spread)
    finally:
        spread.release()
    torch.testing.assert_close(there[0], here[0], atol=1e-3, rtol=0)  # decoded frames of latents equal to ~1e-5
    torch.testing.assert_close(there[1]["waveform"], here[1]["waveform"], atol=1e-3, rtol=0)
    assert there[2] == here[2] == 48.0
