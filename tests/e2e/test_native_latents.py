"""Native LTX-2 latent nodes around ours in a real ComfyUI (real NestedTensors): EmptyLTXVLatentVideo's video
joined by LTXVConcatAVLatent to an audio latent feeds LTX-2 Sampler, whose LATENT LTXVSeparateAVLatent splits and
LTXVConcatAVLatent joins again for LTX-2 Decode, which writes the mp4 with sound (nodes/interop.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import av

from .conftest import ROOT, TINY
from .test_comfyui import EXAMPLES


def _native_graph() -> dict:
    """The one-stage example with native latent nodes between ours (96 x 64, 9 frames at 24 fps). The audio latent
    is LTX-2 Empty Latent's, split off: ComfyUI's LTXVAudioVAELoader (which LTXVEmptyLatentAudio needs) cannot
    build the tiny checkpoint's audio VAE from its metadata (it wants the released config's `in_channels`)."""
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
