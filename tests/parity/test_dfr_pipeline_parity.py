"""DFR's chain (`ltx2_core.dfr_pipeline.sample_dfr`) against ltx-pipelines 1.2.0's `DFRPipeline` through its own
`__call__` (tests/parity/ref120/dfr.py: its noise, its stage order, its tiles) on the tiny LTX-2.5 release, fp32:
the dev transformer rewritten with the keyframe embedding (the keyframe-slot transformer is not public), the
distilled LoRA in every stage, a tiny detailing IC-LoRA (the tiny LoRA's layout, reference_downscale_factor 2 in its
metadata) for stage 2, the tiny temporal x2 upsampler, two images (frames 0 and 40, CRF 0), our prompt contexts.

49 frames (segments of 24: slots at 24 and 48), one temporal round (97 frames at 48 fps, two tiles). Compared, call
by call in the order they ran (stage 1, stage 2, tile 0, tile 1): the video latent, the audio latent (the tiles have
none on either side) and the generated keyframes, at TOL (the other pipelines' 1e-4: the same fp32 model through
different op orders); then the latents handed to the decoders (the stitched video trimmed to 97 frames; stage 1's
audio) and the sound's cut; the same run through `pipeline.generate` (Request mode "dfr"). A second case: two
rounds (2 tiles, then 4: the second round carries the first's keyframes and slots), no detailing LoRA, no images."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from PIL import Image
from support.model_files import write_lora, write_temporal_upsampler
from support.reference120 import run_reference
from support.release25 import write_release25
from support.transformer25 import write_transformer25

from ltx2_core import TransformerConfig
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.demo import demo_transformer
from ltx2_core.dfr import output_frames, sound_samples
from ltx2_core.dfr_pipeline import detailing_downscale, sample_dfr
from ltx2_core.loader.lora import load_lora
from ltx2_core.model_files import ModelFiles
from ltx2_core import stages as stages_module
from ltx2_core.dfr import DFR
from ltx2_core.pipeline import LocalSampler, encode, generate
from ltx2_core.request import Request
from ltx2_core.stages import Generation

TOL = {"atol": 1e-4, "rtol": 1e-4}
SIZE, FRAMES, FPS, SEED, ROUNDS = 128, 49, 24.0, 7, 1
IMAGES = ((0, 0.8), (40, 0.6))
AUDIO_SAMPLES, AUDIO_RATE = 100_000, 16_000


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dfr120")
    paths = write_release25(folder / "models")
    config = dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True)
    write_transformer25(paths["dev"], demo_transformer(config, seed=3).state_dict(), config)
    paths["temporal_upsampler"] = write_temporal_upsampler(folder / "models" / "temporal.safetensors")
    detailing = write_lora(folder / "models" / "loras" / "detailing.safetensors", seed=8, version="2.5",
                           metadata={"reference_downscale_factor": "2"})
    rng = np.random.default_rng(3)
    images = []
    for frame, strength in IMAGES:
        path = folder / f"image{frame}.png"
        Image.fromarray(rng.integers(0, 256, (96, 160, 3), dtype=np.uint8)).save(path)
        images.append((str(path), frame, strength, 0))
    files = ModelFiles(checkpoint=str(paths["dev"]), text_encoder=str(paths["text_encoder"]),
                       upsampler=str(paths["upsampler"]), vae=str(paths["vae"]), audio_vae=str(paths["audio_vae"]),
                       distilled_lora=str(paths["distilled_lora"]), temporal_upsampler=str(paths["temporal_upsampler"]),
                       version="2.5")
    models = files.load("cpu", torch.float32)
    temporal = models.temporal_upsampler
    positive, _ = encode(models.prompt_encoder, "a long walk along the shore at dusk")
    results = []
    result = sample_dfr(LocalSampler(models.transformer), models, positive,
                        [ImageCondition(*image) for image in images], SIZE, SIZE, FRAMES, FPS, SEED, ROUNDS,
                        temporal, (load_lora(detailing), 1.0), detailing_downscale(str(detailing)), results)
    # the same run through pipeline.generate (Request mode "dfr"), its decode replaced by a recorder
    decoded = []

    def recording_decode(latent, decoders, tiling=None, generator=None, video_decode=None):
        decoded.append(latent)
        frames = (latent.video.shape[2] - 1) * 8 + 1
        return Generation(torch.zeros(frames, SIZE, SIZE, 3), torch.zeros(2, AUDIO_SAMPLES), AUDIO_RATE, latent.fps)

    request = Request("a long walk along the shore at dusk", width=SIZE, height=SIZE, frames=FRAMES, fps=FPS,
                      seed=SEED, mode="dfr", images=tuple(ImageCondition(*image) for image in images),
                      dfr=DFR(ROUNDS, str(detailing)))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(stages_module, "decode", recording_decode)
        generation = generate(request, models)
    settings = {"files": {k: str(v) for k, v in paths.items()}, "detailing": str(detailing),
                "audio_samples": AUDIO_SAMPLES, "audio_rate": AUDIO_RATE,
                "call": {"prompt": "unused", "seed": SEED, "height": SIZE, "width": SIZE, "num_frames": FRAMES,
                         "frame_rate": FPS, "images": images, "temporal_upsample_rounds": ROUNDS}}
    ref = run_reference("dfr.py", {"positive.video": positive.video, "positive.audio": positive.audio}, settings,
                        folder, timeout=1800)
    return results, result, ref, (decoded[0], generation)


def test_each_stage_and_tile_matches_the_reference_call(runs):
    results, _, ref, _ = runs
    calls = sorted(int(key[4:].split(".")[0]) for key in ref if key.startswith("call") and key.endswith(".video"))
    assert len(results) == len(calls) == 4  # stage 1, stage 2, the round's two tiles
    for n, result in enumerate(results):
        torch.testing.assert_close(result.video, ref[f"call{n}.video"], **TOL, msg=f"call {n} video")
        assert (result.audio is None) == (f"call{n}.audio" not in ref)  # the tiles: video only on both sides
        if result.audio is not None:
            torch.testing.assert_close(result.audio, ref[f"call{n}.audio"], **TOL, msg=f"call {n} audio")
        assert (result.keyframes is None) == (f"call{n}.keyframes" not in ref)
        if result.keyframes is not None:
            torch.testing.assert_close(result.keyframes, ref[f"call{n}.keyframes"], **TOL, msg=f"call {n} slots")
    assert results[2].audio is None and results[3].audio is None


def test_the_decoders_get_the_reference_latents(runs):
    results, result, ref, _ = runs
    assert int(ref["detailing_downscale"]) == 2
    frames = output_frames(FRAMES, ROUNDS)
    assert frames == int(ref["out.frames"]) == 97  # integers: exact
    assert result.latent.video.shape[2] == (frames - 1) // 8 + 1
    torch.testing.assert_close(result.latent.video, ref["out.video"], **TOL, msg="the video decoded")
    torch.testing.assert_close(result.latent.audio, ref["out.audio"], **TOL, msg="stage 1's audio decoded")
    torch.testing.assert_close(result.latent.audio, results[0].audio, atol=0, rtol=0)  # the same tensor: a copy
    assert result.latent.fps == FPS * 2 ** ROUNDS
    assert sound_samples(AUDIO_SAMPLES, frames, result.latent.fps, AUDIO_RATE) == int(ref["out.audio_samples"])


def test_request_mode_dfr_runs_the_same_chain(runs):
    """`pipeline.generate` of a Request of mode "dfr" (its own prompt encoding, the loaded temporal upsampler, the
    detailing LoRA from its path): the decoder gets the reference's latents, and the sound is cut to the video."""
    _, _, ref, (latent, generation) = runs
    torch.testing.assert_close(latent.video, ref["out.video"], **TOL, msg="the video decoded")
    torch.testing.assert_close(latent.audio, ref["out.audio"], **TOL, msg="stage 1's audio decoded")
    assert generation.frames.shape[0] == int(ref["out.frames"]) and generation.fps == FPS * 2 ** ROUNDS
    assert generation.waveform.shape[-1] == int(ref["out.audio_samples"]) < AUDIO_SAMPLES  # cut: integers, exact


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory):
    """Two temporal rounds (193 frames at 96 fps: 2 tiles, then 4, the second round carrying the first's keyframes
    and slots), no detailing LoRA, no images, another seed: each call and the decoders' latents."""
    folder = tmp_path_factory.mktemp("dfr120r2")
    paths = write_release25(folder / "models")
    config = dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True)
    write_transformer25(paths["dev"], demo_transformer(config, seed=3).state_dict(), config)
    paths["temporal_upsampler"] = write_temporal_upsampler(folder / "models" / "temporal.safetensors")
    files = ModelFiles(checkpoint=str(paths["dev"]), text_encoder=str(paths["text_encoder"]),
                       upsampler=str(paths["upsampler"]), vae=str(paths["vae"]), audio_vae=str(paths["audio_vae"]),
                       distilled_lora=str(paths["distilled_lora"]), temporal_upsampler=str(paths["temporal_upsampler"]),
                       version="2.5")
    models = files.load("cpu", torch.float32)
    positive, _ = encode(models.prompt_encoder, "waves rolling in")
    results = []
    result = sample_dfr(LocalSampler(models.transformer), models, positive, [], SIZE, SIZE, FRAMES, FPS, SEED + 1, 2,
                        models.temporal_upsampler, None, 2, results)
    settings = {"files": {k: str(v) for k, v in paths.items()}, "detailing": None,
                "audio_samples": AUDIO_SAMPLES, "audio_rate": AUDIO_RATE,
                "call": {"prompt": "unused", "seed": SEED + 1, "height": SIZE, "width": SIZE, "num_frames": FRAMES,
                         "frame_rate": FPS, "images": [], "temporal_upsample_rounds": 2}}
    ref = run_reference("dfr.py", {"positive.video": positive.video, "positive.audio": positive.audio}, settings,
                        folder, timeout=1800)
    return results, result, ref


def test_two_rounds_without_detailing_match_the_reference_call(two_rounds):
    results, result, ref = two_rounds
    calls = sorted(int(key[4:].split(".")[0]) for key in ref if key.startswith("call") and key.endswith(".video"))
    assert len(results) == len(calls) == 8  # stage 1, stage 2, 2 tiles, 4 tiles
    for n, sampled in enumerate(results):
        torch.testing.assert_close(sampled.video, ref[f"call{n}.video"], **TOL, msg=f"call {n} video")
        assert (sampled.keyframes is None) == (f"call{n}.keyframes" not in ref)
        if sampled.keyframes is not None:
            torch.testing.assert_close(sampled.keyframes, ref[f"call{n}.keyframes"], **TOL, msg=f"call {n} slots")
    assert int(ref["out.frames"]) == output_frames(FRAMES, 2) == 193 and result.latent.fps == FPS * 4
    torch.testing.assert_close(result.latent.video, ref["out.video"], **TOL, msg="the video decoded")
    torch.testing.assert_close(result.latent.audio, ref["out.audio"], **TOL, msg="stage 1's audio decoded")
