"""Dub-It (LTX-2.5) end to end against ltx-pipelines 1.2.0's `DubItPipeline` through its own `__call__`
(tests/parity/ref120/pipelines.py, case `dubit`: its noise, its two stages, the latents it hands its decoders), on the
tiny LTX-2.5 release in its released layout (tests/support/release25.py), fp32.

The Dub-It IC-LoRA is not public: a tiny IC-LoRA written in the layout of the IC-LoRA case stands in (metadata
reference_downscale_factor 2, so the clip is encoded at a quarter of the full size in stage 1 and half in stage 2).
The clip: 20 frames at 24 fps (dubbed over its first 17, floored to 8k+1 as the reference's `snap_frames_to_grid`)
with 1 s of stereo sound, longer than the clip: the whole sound is the stage-1 audio reference, as the reference
decodes the file's whole audio stream. Both sides read the mp4 with PyAV (the A2V and retake cases pin down that
the decoded sound agrees within the other tolerances), so no waveform is injected.

What is compared: each stage's video (stage 1 half size with the IC-LoRA fused, stage 2 full size with it fused
again and the clip re-encoded), stage 1's audio (the reference tokens appended at negative times), the video handed
to the decoder, and the audio returned (stage 1's; stage 2 holds it frozen). As the IC-LoRA case: against the
reference with its fusion rule aggregating in fp32 at TOL, and against 1.2.0 as shipped (bf16-rounded fused
weights) within BF16_FUSION_GAP.
"""

from __future__ import annotations

import pytest
import torch
from support.model_files import write_lora
from support.reference120 import run_reference
from support.release25 import write_release25

import ltx2_core.pipeline as pipeline_module
from ltx2_core.conditioning import Dub
from ltx2_core.media import write_mp4
from ltx2_core.model_files import ModelFiles
from ltx2_core.pipeline import LocalSampler, encode_request, generate
from ltx2_core.request import Request

TOL = {"atol": 1e-4, "rtol": 1e-4}  # as test_pipelines120_parity.py
BF16_FUSION_GAP = 2e-2  # the reference's bf16-rounded fused weights against our fp32 fusion (as the IC-LoRA case)
SIZE, CLIP_FRAMES, FRAMES, FPS, SEED = 128, 20, 17, 24.0, 7
PROMPT = "a woman speaks to the camera in French"


class Recorder:
    """A `StageSampler` around ours that keeps each stage's result."""

    def __init__(self, sampler: LocalSampler) -> None:
        self.sampler, self.config, self.device, self.results = sampler, sampler.config, sampler.device, []

    def __call__(self, *args, **kwargs):
        result = self.sampler(*args, **kwargs)
        self.results.append(result)
        return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dubit120")
    paths = write_release25(folder / "models")
    paths["ic_lora"] = write_lora(folder / "models" / "loras" / "dub-it-2.5.safetensors", seed=6, version="2.5",
                                  metadata={"reference_downscale_factor": "2"})
    g = torch.Generator().manual_seed(9)
    sound = 0.3 * torch.sin(torch.linspace(0, 700, 48000))[None].expand(2, -1).clone()
    clip = write_mp4(folder / "clip.mp4", torch.rand(CLIP_FRAMES, 96, 160, 3, generator=g), 24, sound, 48000)
    dub = Dub(str(clip), downscale=2)
    info = dub.info()
    assert (info.frames, info.fps) == (FRAMES, FPS)
    request = Request(prompt=PROMPT, width=SIZE, height=SIZE, frames=info.frames, fps=info.fps, seed=SEED,
                      mode="distilled", dub=dub)
    files = ModelFiles(checkpoint=str(paths["distilled"]), text_encoder=str(paths["text_encoder"]),
                       upsampler=str(paths["upsampler"]), vae=str(paths["vae"]), audio_vae=str(paths["audio_vae"]),
                       version="2.5", loras=((str(paths["ic_lora"]), 1.0),))
    models = files.load("cpu", torch.float32)
    assert len(models.ic_loras) == 1  # an IC-LoRA (its metadata states the factor): fused around each stage
    positive, _ = encode_request(request, models.prompt_encoder, models.transformer.config)
    decoded = []
    recorder = Recorder(LocalSampler(models.transformer))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(pipeline_module, "decode", lambda latent, *a, **k: decoded.append(latent))
        generate(request, models, sampler=recorder)
    tensors = {"dubit.positive.video": positive.video, "dubit.positive.audio": positive.audio}
    case = {"pipeline": "dubit", "ic_lora": str(paths["ic_lora"]), "contexts": ["dubit.positive"],
            "call": {"prompt": PROMPT, "seed": SEED, "height": SIZE, "width": SIZE, "images": [],
                     "reference_video_path": str(clip)}}
    reference = {fuse: run_reference("pipelines.py", tensors, {"files": {k: str(v) for k, v in paths.items()},
                                                               "fuse": fuse, "cases": {"dubit": case}},
                                     folder, timeout=1200)
                 for fuse in ("fp32", "bf16")}
    return recorder.results, decoded[0], reference


def test_dub_it_matches_the_reference_call(runs):
    results, latent, reference = runs
    ref = reference["fp32"]
    assert len(results) == 2 and int(ref["dubit.stage2.calls"]) == 2
    for n, result in enumerate(results, 1):
        torch.testing.assert_close(result.video, ref[f"dubit.stage{n}.video"], **TOL, msg=f"stage {n} video")
    torch.testing.assert_close(results[0].audio, ref["dubit.stage1.audio"], **TOL, msg="stage 1 audio")
    torch.testing.assert_close(latent.video, ref["dubit.out.video"], **TOL, msg="the video returned")
    torch.testing.assert_close(latent.audio, ref["dubit.out.audio"], **TOL, msg="the audio returned")


def test_dub_it_returns_stage_one_audio(runs):
    """The reference decodes stage 1's audio latent; stage 2 holds it frozen (its own result is the same values)."""
    results, latent, reference = runs
    ref = reference["fp32"]
    assert torch.equal(ref["dubit.out.audio"], ref["dubit.stage1.audio"])  # the reference's own copy
    assert torch.equal(latent.audio, results[0].audio)  # ours: stage 1's latent returned as it is
    torch.testing.assert_close(ref["dubit.stage2.audio"], ref["dubit.stage1.audio"], atol=1e-6, rtol=0)


def test_the_bf16_fusing_reference_is_within_its_rounding(runs):
    results, latent, reference = runs
    ref = reference["bf16"]
    for what in ("video", "audio"):
        gap = (getattr(latent, what) - ref[f"dubit.out.{what}"]).abs().max().item()
        assert gap <= BF16_FUSION_GAP, f"Dub-It {what}: {gap:.2e}"
