"""DFR (`--mode dfr`, one temporal round) under torchrun (2 ranks, gloo, Ulysses sp 2) on the tiny LTX-2.5 release
with DFR's files: every rank runs the chain (stages, slots, the rounds' video-only tiles), rank 0 alone decodes;
the clip equals one process's (frames and waveform within 1e-4 before encoding)."""

from __future__ import annotations

import pytest
import torch
from distributed.test_torchrun import _generate
from support.release25 import write_dfr_files, write_release25


@pytest.fixture(scope="module")
def flags(tmp_path_factory):
    models = tmp_path_factory.mktemp("dfr_torchrun") / "models"
    paths, dfr = write_release25(models), write_dfr_files(models)
    return ("--checkpoint", str(dfr["dfr_transformer"]), "--text-encoder", str(paths["text_encoder"]), "--vae",
            str(paths["vae"]), "--audio-vae", str(paths["audio_vae"]), "--upsampler", str(paths["upsampler"]),
            "--distilled-lora", str(paths["distilled_lora"]), "--mode", "dfr", "--temporal-rounds", "1",
            "--temporal-upsampler", str(dfr["temporal_upsampler"]), "--detailing-lora", str(dfr["detailing_lora"]),
            "--width", "128", "--height", "128", "--frames", "17", "--dtype", "float32")


def test_dfr_on_two_ranks_is_what_one_process_writes(flags, tmp_path):
    single = _generate(tmp_path, "single", *flags)
    assert single["frames"].shape[0] == 33  # (17 - 1)·2 + 1
    # one prompt, no negative (DFR runs no guidance): rank 0 encodes it and broadcasts, as before the text's spread
    spread = _generate(tmp_path, "spread", *flags, "--sp", "2", ranks=2, text="rank 0 encodes the prompts")
    for name in ("frames", "waveform"):
        torch.testing.assert_close(spread[name], single[name], atol=1e-4, rtol=0)
