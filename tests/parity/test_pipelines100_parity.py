"""LTX-2.0 and 2.3's two-stage pipeline end to end against ltx-pipelines 1.0.0's own `TI2VidTwoStagesPipeline`
through its `__call__` (tests/parity/ref100/pipelines.py: its noise, its stage order, the latents it hands its
decoders), on tiny single-file checkpoints, fp32. 2.0 and 2.3 follow 1.0.0 where it and 1.2.0 differ
(docs/references.md): the run returns stage 2's audio, a keyframe spans a latent frame's 8 pixel frames, and held
tokens are noised from their clean values; the 2.3 case holds images at frames 0 (strength 0.8), 8 and 16 (0.6), so
each of those rules shows in it. The 2.3 keyframes case runs 1.0.0's `KeyframeInterpolationPipeline` on the same images:
every one appended in both stages, the frame-0 one spanning [0, 1) / fps (the causal fix) next to [8, 16) / fps for
frame 8, and stage 2's audio returned. The HQ case (`TI2VidTwoStagesHQPipeline`, 2.3 with the same images): res_2s in
both stages, the distilled LoRA at 0.25 and 0.5, stage 2's audio returned (1.2.0's HQ returns stage 1's).

Our side runs `pipeline.generate` on the same files, loaded by `ModelFiles` as the command line loads them, and
records the latent handed to the decoder; the reference's prompt encoding returns our contexts (the text path's
parity is tests/parity/test_text_parity.py). 1.0.0 fuses LoRAs into bf16 weights only; the tiny files are fp32, whose
fusion the reference script routes through the same arithmetic. Tolerance atol = rtol = 1e-4, as the other loops.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from support.model_files import write_lora, write_upsampler
from support.reference120 import run_reference

import ltx2_core.pipeline as pipeline_module
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.model_files import ModelFiles
from ltx2_core.pipeline import encode_request, generate, guidance_for
from ltx2_core.request import Request

TOL = {"atol": 1e-4, "rtol": 1e-4}
SIZE, FRAMES, FPS, SEED, STEPS = 128, 17, 24.0, 7, 3
PROMPT, NEGATIVE = "a red car in the rain at night", "blurry, static"
IMAGES = {"2.0": (), "2.3": ((0, 0.8), (8, 1.0), (16, 0.6))}  # (frame, strength)
CASES = {"2.0": ("2.0", "two-stage"), "2.3": ("2.3", "two-stage"), "2.3-keyframes": ("2.3", "keyframes"),
         "2.3-hq": ("2.3", "two-stage-hq")}  # 2.3-hq: res_2s, stage 2's audio returned


def _guidance(params) -> dict:
    return {"cfg": params.cfg, "stg": params.stg, "stg_blocks": list(params.stg_blocks), "rescale": params.rescale,
            "modality": params.modality}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_checkpoints, gemma_files):
    """case -> (our decoded latent, the reference's outputs)."""
    folder = tmp_path_factory.mktemp("pipelines100")
    rng = np.random.default_rng(3)
    tensors, cases, ours = {}, {}, {}
    for name, (version, mode) in CASES.items():
        images = IMAGES[version]
        upsampler = write_upsampler(folder / f"upsampler-{version}.safetensors", version=version)
        lora = write_lora(folder / f"distilled-lora-{version}.safetensors", seed=1, version=version)
        paths = []
        for frame, _ in images:
            paths.append(folder / f"{name}-image{frame}.png")
            Image.fromarray(rng.integers(0, 256, (96, 160, 3), dtype=np.uint8)).save(paths[-1])
        conditions = tuple(ImageCondition(str(p), f, s, crf=0) for p, (f, s) in zip(paths, images))
        request = Request(PROMPT, negative_prompt=NEGATIVE, width=SIZE, height=SIZE, frames=FRAMES, fps=FPS,
                          seed=SEED, steps=STEPS, mode=mode, images=conditions)
        files = ModelFiles(checkpoint=str(tiny_checkpoints[version]), text_encoder=str(gemma_files[0]),
                           upsampler=str(upsampler), distilled_lora=str(lora))
        models = files.load("cpu", torch.float32)
        positive, negative = encode_request(request, models.prompt_encoder, models.transformer.config)
        decoded = []
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(pipeline_module, "decode", lambda latent, *a, **k: decoded.append(latent))
            generate(request, models)
        ours[name] = decoded[0]
        tensors |= {f"{name}.{which}.{stream}": getattr(text, stream) for which, text in
                    (("positive", positive), ("negative", negative)) for stream in ("video", "audio")}
        video, audio = guidance_for(request, models.transformer.config)
        cases[name] = {
            "pipeline": mode.replace("-", "_"),
            "checkpoint": str(tiny_checkpoints[version]), "upsampler": str(upsampler), "distilled_lora": str(lora),
            "call": {"prompt": PROMPT, "negative_prompt": NEGATIVE, "seed": SEED, "height": SIZE, "width": SIZE,
                     "num_frames": FRAMES, "frame_rate": FPS, "num_inference_steps": STEPS,
                     "video_guider_params": _guidance(video), "audio_guider_params": _guidance(audio),
                     "images": [(str(p), f, s, 0) for p, (f, s) in zip(paths, images)]}}
    reference = run_reference("pipelines.py", tensors, {"cases": cases}, folder, timeout=1800, version="1.0.0")
    return ours, reference


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_two_stage_pipeline_matches_the_100_call(runs, name):
    ours, reference = runs
    latent = ours[name]
    torch.testing.assert_close(latent.video, reference[f"{name}.out.video"], **TOL, msg="the video returned")
    # 1.0.0 returns the refinement's audio (1.2.0's two-stage, which 2.5 follows, returns stage 1's)
    torch.testing.assert_close(latent.audio, reference[f"{name}.out.audio"], **TOL, msg="the audio returned")


def test_keyframes_differ_from_two_stage_with_the_same_images(runs):
    """The keyframes case is its own pipeline: frame 0 appended (not held) changes what is returned."""
    _, reference = runs
    assert (reference["2.3-keyframes.out.video"] - reference["2.3.out.video"]).abs().max() > 0.1
