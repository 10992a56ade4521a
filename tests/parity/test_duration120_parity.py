"""An automatic length against ltx-pipelines 1.2.0 through its own pipelines' `__call__` with an `AutoDuration`
(tests/parity/ref120/pipelines.py: its noise, its DurationPredictor loaded by `DurationPredictor.from_checkpoint`
from the split layout's `duration_head_path`), on the tiny LTX-2.5 release (tests/support/release25.py), fp32:

* text to audio (`T2AOneStagePipeline`): the head reads the positive prompt's audio contexts alone; on a tiny 2.5
  transformer with `use_prompt_adaln_single` and `audio_ff_bias` on, as test_t2a_parity.py (1.2.0's audio-only
  configurator ignores both flags and builds them on, so it cannot load the released structure, which has both off);
* one-stage video + audio (`TI2VidOneStagePipeline`): both contexts.

Our side runs `pipeline.generate` with `Request.auto_frames` on the same files (`ModelFiles`, the head found by its
header in the models folder, as the command line finds it). The frame counts are integers and equal exactly; the
stage latents at the other pipeline parity tests' tolerance (TOL). The head's prediction sits well inside the bounds
and away from a frame-rounding edge (asserted), so that the frame count cannot turn on fp32 rounding."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from support.reference120 import run_reference
from support.release25 import write_release25
from support.transformer25 import write_transformer25

import ltx2_core.pipeline as pipeline_module
from ltx2_core.duration import AutoFrames, predict_seconds
from ltx2_core.demo import demo_transformer
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model_files import ModelFiles
from ltx2_core.pipeline import LocalSampler, encode_request, generate, guidance_for
from ltx2_core.request import Request

TOL = {"atol": 1e-4, "rtol": 1e-4}  # test_pipelines120_parity.py's, for the same pipelines' loops
SIZE, FPS, SEED, STEPS = 128, 24.0, 7, 3
PROMPT, NEGATIVE = "rain drums on a tin roof as a dog barks twice", "blurry, static"
AUTO = AutoFrames(0.3, 2.0)
EDGE_MARGIN = 0.2  # frames between seconds · fps and the nearest 8k + 0.5 (where the 8k+1 count changes)


def _guidance(params) -> dict:
    return {"cfg": params.cfg, "stg": params.stg, "stg_blocks": list(params.stg_blocks), "rescale": params.rescale,
            "modality": params.modality}


class Recorder:
    """A `StageSampler` around ours that keeps each stage's result."""

    def __init__(self, sampler: LocalSampler) -> None:
        self.sampler, self.config, self.device, self.results = sampler, sampler.config, sampler.device, []

    def __call__(self, *args, **kwargs):
        self.results.append(self.sampler(*args, **kwargs))
        return self.results[-1]


def _case(name: str, config) -> tuple[Request, dict]:
    """Our request and the reference's case for pipeline `name` (t2a, one_stage)."""
    audio_only = name == "t2a"
    request = Request(prompt=PROMPT, negative_prompt=NEGATIVE, width=SIZE, height=SIZE, fps=FPS, seed=SEED,
                      steps=STEPS, audio_only=audio_only, auto_frames=AUTO)
    video, audio = guidance_for(request, config)
    call = {"prompt": PROMPT, "negative_prompt": NEGATIVE, "seed": SEED, "frame_rate": FPS,
            "num_inference_steps": STEPS, "audio_guider_params": _guidance(audio),
            "num_frames": {"min_seconds": AUTO.min_seconds, "max_seconds": AUTO.max_seconds}}
    if not audio_only:
        call |= {"height": SIZE, "width": SIZE, "images": [], "video_guider_params": _guidance(video)}
    return request, {"pipeline": name, "contexts": [f"{name}.positive", f"{name}.negative"], "call": call,
                     "transformer": "t2a_dev" if audio_only else "dev"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("duration120")
    paths = write_release25(folder / "models")
    files = ModelFiles(str(folder / "models"), vae=str(paths["vae"]), version="2.5").resolved()
    assert files.duration_head == str(paths["duration_head"])  # found by its header
    config = dataclasses.replace(TransformerConfig.tiny("2.5"), prompt_adaln=True, audio_ff_bias=True)
    paths["t2a_dev"] = write_transformer25(folder / "t2a-dev.safetensors", demo_transformer(config).state_dict(),
                                           config)
    ours, tensors, cases = {}, {}, {}
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ("t2a", "one_stage"):
            transformer = paths["t2a_dev" if name == "t2a" else "dev"]
            models = dataclasses.replace(files, checkpoint=str(transformer)).load("cpu", torch.float32)
            request, cases[name] = _case(name, models.transformer.config)
            positive, negative = encode_request(request, models.prompt_encoder, models.transformer.config)
            decoded = []
            monkeypatch.setattr(pipeline_module, "decode", lambda latent, *a, **k: decoded.append(latent))
            recorder = Recorder(LocalSampler(models.transformer))
            generate(request, models, sampler=recorder)
            seconds = predict_seconds(models.duration_head, positive, request.audio_only)
            ours[name] = (recorder.results, decoded[0], seconds)
            tensors |= {f"{name}.positive.video": positive.video, f"{name}.positive.audio": positive.audio,
                        f"{name}.negative.video": negative.video, f"{name}.negative.audio": negative.audio}
    settings = {"files": {k: str(v) for k, v in paths.items()}, "fuse": "fp32", "cases": cases}
    return ours, run_reference("pipelines.py", tensors, settings, folder, timeout=1800)


@pytest.mark.parametrize("name", ["t2a", "one_stage"])
def test_the_automatic_length_matches_the_reference_call(runs, name):
    ours, ref = runs
    results, latent, seconds = ours[name]
    frames = FPS * seconds
    assert AUTO.min_seconds + 0.05 < seconds < AUTO.max_seconds - 0.05, seconds  # inside the bounds: not clamped
    assert abs((frames - 0.5 + 4) % 8 - 4) >= EDGE_MARGIN, frames  # away from a rounding edge
    torch.testing.assert_close(torch.tensor([seconds]), ref[f"{name}.head.seconds"], rtol=5e-6, atol=0)  # as
    # test_duration_head_parity.py: the same fp32 head; given the contexts the reference's pipeline gives it
    assert ref[f"{name}.head.given"].tolist() == [name != "t2a", True]
    assert ref[f"{name}.stage1.frames"].item() == 17  # the head's ~0.9 s at 24 fps on the 8k+1 grid: integers
    assert len(results) == 1 == ref[f"{name}.stage1.calls"].item()
    torch.testing.assert_close(results[0].audio, ref[f"{name}.stage1.audio"], **TOL, msg=f"{name}: stage audio")
    torch.testing.assert_close(latent.audio, ref[f"{name}.out.audio"], **TOL, msg=f"{name}: the audio returned")
    if name == "one_stage":
        assert latent.video.shape[2] == (17 - 1) // 8 + 1  # our clip: 17 frames, 3 latent frames
        torch.testing.assert_close(results[0].video, ref["one_stage.stage1.video"], **TOL, msg="stage video")
        torch.testing.assert_close(latent.video, ref["one_stage.out.video"], **TOL, msg="the video returned")
