"""Native LTX-2 latent nodes around ours in a real ComfyUI (real NestedTensors): EmptyLTXVLatentVideo's video
joined by LTXVConcatAVLatent to an audio latent feeds LTX-2 Sampler, whose LATENT LTXVSeparateAVLatent splits and
LTXVConcatAVLatent joins again for LTX-2 Decode, which writes the mp4 with sound (nodes/interop.py). On the tiny
checkpoint ComfyUI's own loaders read (support/native_files.py), the values, read out through the test-only node of
tests/e2e/dump_node: native empty latents sample as ours; ComfyUI's VAEDecode and LTXVAudioVAEDecode decode our
latent as LTX-2 Decode does; Save Latent -> Load Latent -> LTX-2 Decode as LTX-2 Decode directly
(docs/interop/latents.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import av
import pytest
import torch
from safetensors.torch import load_file

from .conftest import ROOT, TINY
from .test_comfyui import EXAMPLES


def _native_graph() -> dict:
    """The one-stage example with native latent nodes between ours (96 x 64, 9 frames at 24 fps). The audio latent
    is LTX-2 Empty Latent's, split off and joined to the native video (LTXVEmptyLatentAudio's: `_both_ways_graph`)."""
    graph = json.loads((ROOT / "example_workflows" / "api" / "ltx2_t2v_one_stage.api.json").read_text())
    graph["1"]["inputs"]["ckpt_name"] = TINY["checkpoint"]
    graph["2"]["inputs"]["text_encoder"] = TINY["text_encoder"]
    graph["4"]["inputs"] |= {"width": 96, "height": 64, "frames": 9}
    graph["6"]["inputs"]["steps"] = 2
    graph |= {
        "10": {"class_type": "EmptyLTXVLatentVideo", "inputs": {"width": 96, "height": 64, "length": 9,
                                                                "batch_size": 1}},
        "11": {"class_type": "LTXVSeparateAVLatent", "inputs": {"av_latent": ["4", 0]}},  # our empty audio
        "12": {"class_type": "LTXVConcatAVLatent", "inputs": {"video_latent": ["10", 0], "audio_latent": ["11", 1]}},
        "13": {"class_type": "LTXVSeparateAVLatent", "inputs": {"av_latent": ["6", 0]}},
        "14": {"class_type": "LTXVConcatAVLatent", "inputs": {"video_latent": ["13", 0], "audio_latent": ["13", 1]}},
    }
    graph["6"]["inputs"]["latent"] = ["12", 0]
    graph["7"]["inputs"]["latent"] = ["14", 0]
    return graph


def test_native_latent_nodes_feed_our_sampler_and_split_and_join_its_latent(comfyui, tmp_path):
    assert EXAMPLES["ltx2_t2v_one_stage"][1] == (9, 96, 64)
    workflow = tmp_path / "native.api.json"
    workflow.write_text(json.dumps(_native_graph()))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "ltx2_client.py"), str(workflow), "--server",
                          comfyui.url, "--seed", "3", "--out", str(out), "--timeout", "600"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (video_file,) = out.glob("*.mp4")
    with av.open(str(video_file)) as container:
        video = container.streams.video[0]
        assert (video.frames, video.width, video.height, video.average_rate) == (9, 96, 64, 24)
        assert len(container.streams.audio) == 1


# 17 frames at 24 fps: 17 / 24 * 25 = 17.7 audio latents, 18 by ComfyUI's ceil and by our round alike, and 24 fps is
# the rate interop.clip_fps reads back from 17 frames and 18 audio latents (9 frames would give 10 and 9)
FRAMES, FPS, WIDTH, HEIGHT, AUDIO_LATENTS = 17, 24, 96, 64, 18
# measured on the CPU (ComfyUI 0.26.0, fp32): the sampled latents are bit-identical (the same zeros, the same
# computation); ComfyUI's VAEDecode differs from LTX-2 Decode by float rounding only, max 7.2e-7 on [0, 1] pixels
# (82 % of them differ, mean 1e-7): its decoder agrees with ours bit for bit through conv_in and drifts by a few ulps
# in the up blocks, where ours fuses pixel norm, modulation and SiLU in place into a pre-padded buffer and ComfyUI
# runs them one by one on torch.cat padding; its audio VAE and vocoder give our waveform exactly (0.0). The bound
# leaves room for other CPUs' kernels (docs/interop/latents.md)
IMAGE_ATOL, AUDIO_ATOL = 5e-6, 1e-6


def _dump(name: str, **inputs) -> dict:
    return {"class_type": "E2ESaveTensors", "inputs": {"name": name, **inputs}}


def _both_ways_graph() -> dict:
    """On the native checkpoint: our sampler on LTX-2 Empty Latent (6) and on EmptyLTXVLatentVideo +
    LTXVEmptyLatentAudio (from LTXVAudioVAELoader) joined by LTXVConcatAVLatent (16), same seed and prompt; our
    sampled latent split by LTXVSeparateAVLatent and decoded by VAEDecode (CheckpointLoaderSimple's VAE) and
    LTXVAudioVAEDecode, and by LTX-2 Decode (7); its halves saved by Save Latent; every value dumped."""
    graph = json.loads((ROOT / "example_workflows" / "api" / "ltx2_t2v_one_stage.api.json").read_text())
    del graph["8"], graph["9"]  # the mp4 is the other test's; this one compares values
    graph["1"]["inputs"] |= {"ckpt_name": TINY["native_checkpoint"], "weight_dtype": "fp32"}
    graph["2"]["inputs"]["text_encoder"] = TINY["text_encoder"]
    graph["4"]["inputs"] |= {"width": WIDTH, "height": HEIGHT, "frames": FRAMES, "fps": float(FPS)}
    graph["6"]["inputs"] |= {"steps": 2, "seed": 5}
    graph |= {
        "10": {"class_type": "EmptyLTXVLatentVideo", "inputs": {"width": WIDTH, "height": HEIGHT, "length": FRAMES,
                                                                "batch_size": 1}},
        "20": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": TINY["native_checkpoint"]}},
        "21": {"class_type": "LTXVAudioVAELoader", "inputs": {"ckpt_name": TINY["native_checkpoint"]}},
        "22": {"class_type": "LTXVEmptyLatentAudio", "inputs": {"frames_number": FRAMES, "frame_rate": FPS,
                                                                "batch_size": 1, "audio_vae": ["21", 0]}},
        "12": {"class_type": "LTXVConcatAVLatent", "inputs": {"video_latent": ["10", 0], "audio_latent": ["22", 0]}},
        "16": {"class_type": "LTX2Sampler", "inputs": graph["6"]["inputs"] | {"latent": ["12", 0]}},
        "13": {"class_type": "LTXVSeparateAVLatent", "inputs": {"av_latent": ["6", 0]}},
        "23": {"class_type": "VAEDecode", "inputs": {"samples": ["13", 0], "vae": ["20", 2]}},
        "24": {"class_type": "LTXVAudioVAEDecode", "inputs": {"samples": ["13", 1], "audio_vae": ["21", 0]}},
        "40": {"class_type": "SaveLatent", "inputs": {"samples": ["13", 0], "filename_prefix": "natlat/video"}},
        "41": {"class_type": "SaveLatent", "inputs": {"samples": ["13", 1], "filename_prefix": "natlat/audio"}},
        "30": _dump("ours_sampled", latent=["6", 0]),
        "31": _dump("native_sampled", latent=["16", 0]),
        "32": _dump("native_decoded", images=["23", 0], audio=["24", 0]),
        "33": _dump("ours_decoded", images=["7", 0], audio=["7", 1], fps=["7", 2]),
    }
    return graph


def _loaded_graph(video_file: str, audio_file: str) -> dict:
    """The saved halves read back by Load Latent (from the input folder), joined by LTXVConcatAVLatent and decoded
    by LTX-2 Decode (the model loader as in `_both_ways_graph`); the audio half alone decoded too."""
    decode = {"spatial_tile": 512, "temporal_tile": 64, "seed": 0}
    return {"1": _both_ways_graph()["1"]} | {
        "50": {"class_type": "LoadLatent", "inputs": {"latent": video_file}},
        "51": {"class_type": "LoadLatent", "inputs": {"latent": audio_file}},
        "52": {"class_type": "LTXVConcatAVLatent", "inputs": {"video_latent": ["50", 0], "audio_latent": ["51", 0]}},
        "53": {"class_type": "LTX2Decode", "inputs": {"model": ["1", 0], "latent": ["52", 0]} | decode},
        "54": {"class_type": "LTX2Decode", "inputs": {"model": ["1", 0], "latent": ["51", 0]} | decode},
        "60": _dump("loaded_decoded", images=["53", 0], audio=["53", 1], fps=["53", 2]),
        "61": _dump("loaded_audio_decoded", audio=["54", 1], fps=["54", 2]),
    }


def _run(comfyui, graph: dict, folder: Path) -> dict[str, Path]:
    """The graph run through the client; its downloaded files by name."""
    folder.mkdir()
    workflow = folder / "graph.api.json"
    workflow.write_text(json.dumps(graph))
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "ltx2_client.py"), str(workflow), "--server",
                          comfyui.url, "--out", str(folder / "out"), "--timeout", "600"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return {path.name: path for path in (folder / "out").iterdir()}


@pytest.fixture(scope="module")
def both_ways(comfyui, tmp_path_factory) -> dict[str, dict[str, torch.Tensor]]:
    """Every dumped value of the two graphs by name; the Save Latent files go to the server's input folder (where
    Load Latent lists them, as a user puts them) between the two."""
    folder = tmp_path_factory.mktemp("native-latents")
    files = _run(comfyui, _both_ways_graph(), folder / "first")
    (video_file,) = [name for name in files if name.startswith("video_") and name.endswith(".latent")]
    (audio_file,) = [name for name in files if name.startswith("audio_") and name.endswith(".latent")]
    inputs = comfyui.base / "input"
    for name, target in ((video_file, "natlat_video.latent"), (audio_file, "natlat_audio.latent")):
        shutil.copyfile(files[name], inputs / target)
    files |= _run(comfyui, _loaded_graph("natlat_video.latent", "natlat_audio.latent"), folder / "second")
    return {name.removesuffix(".safetensors"): load_file(path) for name, path in files.items()
            if name.endswith(".safetensors")}


def test_native_empty_latents_sample_as_ours(both_ways):
    """EmptyLTXVLatentVideo + LTXVEmptyLatentAudio (ComfyUI's ceil audio length, no frame rate: read back as 24
    fps from its 18 audio latents) joined by LTXVConcatAVLatent give LTX-2 Sampler what LTX-2 Empty Latent does."""
    ours, native = both_ways["ours_sampled"], both_ways["native_sampled"]
    assert ours["video"].shape == (1, 128, (FRAMES - 1) // 8 + 1, HEIGHT // 32, WIDTH // 32)
    assert ours["audio"].shape == native["audio"].shape == (1, 8, AUDIO_LATENTS, 16)
    assert ours["video"].abs().max() > 0.1  # sampled, not the empty latent
    for half in ("video", "audio"):
        torch.testing.assert_close(native[half], ours[half], rtol=0, atol=0)  # the same computation


def test_comfyui_decodes_our_latent_as_ours_does(both_ways):
    """LTXVSeparateAVLatent -> VAEDecode and LTXVAudioVAEDecode on our sampled latent: the frames and the stereo
    sound of LTX-2 Decode (one tile at this size), to float rounding."""
    ours, native = both_ways["ours_decoded"], both_ways["native_decoded"]
    assert native["images"].shape == ours["images"].shape == (FRAMES, HEIGHT, WIDTH, 3)
    assert ours["images"].std() > 0.01  # not a blank clip
    torch.testing.assert_close(native["images"], ours["images"], rtol=0, atol=IMAGE_ATOL)
    assert int(native["sample_rate"]) == int(ours["sample_rate"]) == 48000
    assert native["waveform"].shape == ours["waveform"].shape and ours["waveform"].shape[:2] == (1, 2)
    assert ours["waveform"].abs().max() > 0
    torch.testing.assert_close(native["waveform"], ours["waveform"], rtol=0, atol=AUDIO_ATOL)


def test_save_latent_and_load_latent_round_trip_into_our_decoder(both_ways):
    """Save Latent cannot write the nested latent (ComfyUI's NestedTensor has no `contiguous`), so its halves are
    saved and loaded apart and joined by LTXVConcatAVLatent; the frame rate (ltx2_fps is not saved) is read back
    from the audio length. LTX-2 Decode gives what it gave for the sampled latent; the audio half alone (Load
    Latent gives it without `type`) decodes to the same sound."""
    direct, loaded = both_ways["ours_decoded"], both_ways["loaded_decoded"]
    assert float(direct["fps"]) == float(loaded["fps"]) == FPS
    for key in ("images", "waveform", "sample_rate"):
        torch.testing.assert_close(loaded[key], direct[key], rtol=0, atol=0)
    torch.testing.assert_close(both_ways["loaded_audio_decoded"]["waveform"], direct["waveform"], rtol=0, atol=0)
