"""`python -m ltx2_core generate --mode dfr`: a tiny run on the tiny LTX-2.5 release with a keyframe-slot dev
transformer (49 frames, one temporal round: an mp4 of 97 frames at 48 fps), and the refusals, each before any model
loads, naming the fix: a transformer without the keyframe embedding, rounds without the temporal upsampler, DFR's
flags without --mode dfr, conditions DFR cannot take."""

from __future__ import annotations

import dataclasses
import re

import pytest
from support.model_files import write_lora, write_temporal_upsampler
from support.release25 import write_release25
from support.transformer25 import write_transformer25

from ltx2_core import TransformerConfig
from ltx2_core.__main__ import main
from ltx2_core.demo import demo_transformer
from ltx2_core.video_io import video_info


@pytest.fixture(scope="module")
def flags(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dfr_cli")
    paths = write_release25(folder / "models")
    config = dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True)
    write_transformer25(paths["dev"], demo_transformer(config, seed=3).state_dict(), config)
    temporal = write_temporal_upsampler(folder / "temporal.safetensors")
    detailing = write_lora(folder / "detailing.safetensors", seed=8, version="2.5",
                           metadata={"reference_downscale_factor": "2"})
    common = ["--text-encoder", str(paths["text_encoder"]), "--vae", str(paths["vae"]), "--audio-vae",
              str(paths["audio_vae"]), "--upsampler", str(paths["upsampler"]), "--distilled-lora",
              str(paths["distilled_lora"]), "--no-progress", "--width", "128", "--height", "128", "--frames", "49"]
    return {"dev": str(paths["dev"]), "plain": str(paths["distilled"]), "common": common, "temporal": str(temporal),
            "detailing": str(detailing), "head": str(paths["duration_head"]), "paths": paths}


def test_a_dfr_run_writes_the_doubled_clip(flags, tmp_path):
    out = tmp_path / "dfr.mp4"
    assert main(["generate", "--checkpoint", flags["dev"], *flags["common"], "--mode", "dfr", "--temporal-rounds",
                 "1", "--temporal-upsampler", flags["temporal"], "--detailing-lora", flags["detailing"] + ":0.9",
                 "--prompt", "a long walk", "--output", str(out)]) == 0
    info = video_info(str(out))
    assert info.frames == 97 and info.fps == 48  # (49 - 1)·2 + 1 frames at twice the rate


@pytest.mark.parametrize("extra, message", [
    (["--checkpoint", "{plain}", "--mode", "dfr"], "does not set 'use_keyframes_abs_pos_embedding'"),
    (["--checkpoint", "{dev}", "--mode", "dfr", "--temporal-rounds", "1"], "need the temporal x2 latent upsampler"),
    (["--checkpoint", "{dev}", "--temporal-rounds", "1"], "--temporal-rounds go with --mode dfr"),
    (["--checkpoint", "{dev}", "--mode", "two-stage", "--detailing-lora", "{detailing}"],
     "--detailing-lora go with --mode dfr"),
    (["--checkpoint", "{dev}", "--mode", "dfr", "--audio", "{detailing}"], "DFR generates a clip from its prompt"),
])
def test_bad_dfr_command_lines_are_refused(flags, tmp_path, capsys, extra, message):
    extra = [e.format(**flags) for e in extra]
    assert main(["generate", *extra, *flags["common"], "--prompt", "x", "--output", str(tmp_path / "o.mp4")]) == 2
    captured = capsys.readouterr()
    assert "loaded in" not in captured.out
    assert re.search(re.escape(message), captured.err), captured.err


def test_the_memory_job_counts_the_output_canvas():
    """The memory check's Job of a DFR request: the padded canvas at the output rate, no guidance, two stages, the
    half-size reference and every slot as guiding tokens."""
    from ltx2_core.dfr import DFR
    from ltx2_core.pipeline import request_job
    from ltx2_core.request import Request

    request = Request("x", width=128, height=128, frames=49, mode="dfr", dfr=DFR(1))
    job = request_job(request, TransformerConfig.tiny("2.5"))
    assert (job.frames, job.fps, job.passes, job.two_stage) == (97, 48.0, 1, True)
    assert job.guide_tokens == 7 * 2 * 2 + 2 * 2 * 4 * 4  # the half-size latent (7 frames of 2x2), 4 slots of 4x4


def test_dfr_takes_the_predicted_length(flags, tmp_path, capsys):
    """--frames auto with --mode dfr: the duration head's 0.9 s within 0.3..2 s is 17 frames (the reference's DFR
    resolves the length the same way), laid out on DFR's segments."""
    out = tmp_path / "auto.mp4"
    assert main(["generate", "--checkpoint", flags["dev"], *flags["common"], "--mode", "dfr", "--frames", "auto",
                 "--auto-duration", "0.3", "2", "--duration-head", flags["head"], "--prompt", "a long walk",
                 "--output", str(out)]) == 0
    assert "-> 17 frames (0.71 s at 24 fps; bounds 0.3..2 s)" in capsys.readouterr().out
    assert video_info(str(out)).frames == 17


def test_the_pipeline_enhances_the_prompt_and_predicts_the_length_of_a_dfr_request(flags, tmp_path, monkeypatch):
    """`pipeline.generate` with a DFR request asking for both: the prompt enhanced before it is encoded, the length
    predicted from it (17 frames), as the reference's DFR `__call__` does them."""
    import torch

    from ltx2_core import pipeline
    from ltx2_core.dfr import DFR
    from ltx2_core.duration import AutoFrames
    from ltx2_core.model_files import ModelFiles
    from ltx2_core.request import Request

    paths = flags["paths"]
    models = ModelFiles(checkpoint=flags["dev"], text_encoder=str(paths["text_encoder"]), vae=str(paths["vae"]),
                        audio_vae=str(paths["audio_vae"]), upsampler=str(paths["upsampler"]),
                        distilled_lora=str(paths["distilled_lora"]), duration_head=flags["head"],
                        version="2.5").load("cpu", torch.float32)
    seen, enhance = [], pipeline.enhance_request

    def recording_enhance(request, encoder):
        seen.append(request.prompt)
        return enhance(request, encoder)

    monkeypatch.setattr(pipeline, "enhance_request", recording_enhance)
    system = tmp_path / "system.txt"
    system.write_text("Rewrite the prompt with more detail.")
    request = Request("a long walk", width=128, height=128, frames=49, mode="dfr", dfr=DFR(0),
                      auto_frames=AutoFrames(0.3, 2.0), enhance_prompt=True, system_prompt=str(system))
    result = pipeline.generate(request, models)
    assert seen == ["a long walk"] and result.frames.shape[0] == 17
