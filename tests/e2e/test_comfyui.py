"""The pack in a real ComfyUI: it registers every node, the example workflows run headless through the client and
write an mp4 with sound, a bad value is refused with HTTP 400 before anything runs, and an interrupt stops sampling
and leaves the pack usable."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import av
import pytest
import torch

from ltx2_core.audio_io import Waveform, read_audio
from nodes import NODE_CLASS_MAPPINGS

from .conftest import GGUF, PACK_FOLDER, ROOT, TINY

CLIENT = ROOT / "tools" / "ltx2_client.py"
FILES = [f"ckpt_name={TINY['checkpoint']}", f"text_encoder={TINY['text_encoder']}"]
UPSAMPLER = f"upscale_model_name={TINY['upsampler']}"
# each example at a tiny size: (workflow, overrides, (frames, width, height) of the video)
EXAMPLES = {
    "ltx2_t2v_one_stage": (["4.width=96", "4.height=64", "4.frames=9", "6.steps=2"], (9, 96, 64)),
    # with LTX-2 Step Cache: 8 steps, so that the cache decides some (its log line says how many it skipped)
    "ltx2_t2v_one_stage_cached": (["4.width=96", "4.height=64", "4.frames=9", "6.steps=8"], (9, 96, 64)),
    # the prompt enhanced by the tiny Gemma first (a test-owned system prompt file: the ComfyUI under test may have no
    # ltx-core holding Lightricks' prompts)
    "ltx2_t2v_enhanced_prompt": (["4.width=96", "4.height=64", "4.frames=9", "6.steps=2",
                                  f"3.system_prompt={Path(__file__).parent / 'enhance_system_prompt.txt'}"],
                                 (9, 96, 64)),
    "ltx2_t2v_two_stage": ([UPSAMPLER, f"lora_name={TINY['lora']}", "5.width=64", "5.height=32", "5.frames=9"],
                           (9, 128, 64)),
    "ltx2_t2v_distilled": ([UPSAMPLER, "4.width=64", "4.height=32", "4.frames=17"], (17, 128, 64)),
    "ltx2_generate_two_stage": ([UPSAMPLER, f"distilled_lora={TINY['lora']}", "4.width=128", "4.height=64",
                                 "4.frames=9", "4.steps=2"], (9, 128, 64)),
    # the HQ two-stage pipeline (res_2s, the distilled LoRA in both stages)
    "ltx2_two_stage_hq": ([UPSAMPLER, f"distilled_lora={TINY['lora']}", "4.width=128", "4.height=64", "4.frames=9",
                           "4.steps=2"], (9, 128, 64)),
    # two worker processes (CPU, gloo: the server runs with --cpu) in place of two GPUs
    "ltx2_t2v_two_gpus": (["4.width=96", "4.height=64", "4.frames=9", "6.steps=2"], (9, 96, 64)),
    # the pictures ship with the pack, which puts them in ComfyUI's input folder (LoadImage reads it)
    "ltx2_i2v_one_stage": (["4.width=96", "4.height=64", "4.frames=9", "6.steps=2"], (9, 96, 64)),
    "ltx2_first_last_frame": (["4.width=96", "4.height=64", "4.frames=17", "6.steps=2"], (17, 96, 64)),
    # keyframe interpolation (mode keyframes): the three pictures moved to frames 0, 8 and 16 of the tiny clip
    "ltx2_keyframe_interpolation": ([UPSAMPLER, f"distilled_lora={TINY['lora']}", "4.width=128", "4.height=64",
                                     "4.frames=17", "4.steps=2", "10.frame=8", "12.frame=16"], (17, 128, 64)),
    # LTX-2.5: the examples' own file names (the tiny release is written under the released names)
    "ltx25_t2v_distilled": (["4.width=64", "4.height=32", "4.frames=9"], (9, 128, 64)),
    "ltx25_i2v_two_stage": (["4.width=64", "4.height=32", "4.frames=9", "8.steps=2"], (9, 128, 64)),
    # the length from the prompt (LTX-2 Predict Length into the latent's frames): the tiny head's 0.9 s, 17 frames
    "ltx25_t2v_auto_length": (["4.width=64", "4.height=32", "6.steps=2", "10.min_seconds=0.5"], (17, 64, 32)),
    # a small card's LTX-2.3 GGUF (models/unet) with its VAE files and text projection file, Gemma 3 in fp4
    "ltx2_gguf_distilled": ([f"text_encoder={TINY['text_encoder']}", UPSAMPLER, "4.width=64", "4.height=32",
                             "4.frames=9"], (9, 128, 64)),
    # audio-to-video: the frames come from the sound's duration (0.4 s covers 9 frames at 24 fps)
    "ltx2_a2v_lipsync": (["4.width=96", "4.height=64", "13.duration=0.4", "6.steps=2"], (9, 96, 64)),
    "ltx2_a2v_music_video": ([UPSAMPLER, f"distilled_lora={TINY['lora']}", "4.width=128", "4.height=64",
                              "4.steps=2", "8.start=1.0", "8.duration=0.4"], (9, 128, 64)),
    # video in (Load Video -> Get Video Components): a depth control through the tiny IC-LoRA (downscale 2: sizes of
    # multiples of 64), and a retake of the shipped clip at its own size, frames and rate
    "ltx2_ic_lora_control": ([f"lora_name={TINY['ic_lora']}", "5.width=128", "5.height=64", "5.frames=9",
                              "7.steps=2"], (9, 128, 64)),
    "ltx2_retake": (["6.steps=2"], (49, 384, 256)),
    # Dub-It on LTX-2.5's files (the tiny release) re-voicing the shipped clip: its 49 frames at 24 fps, at 128x64
    "ltx2_dub_it": ([f"ic_lora={TINY['dub_it_lora']}", "7.width=128", "7.height=64"], (49, 128, 64)),
    # a long clip with its sound: 2 s in windows of 25 frames sharing 8 (3 windows, distilled), decoded once; the
    # example's first three window prompts (more prompts than windows are refused)
    "ltx2_long_video_20s": ([UPSAMPLER, "4.width=128", "4.height=64", "4.duration=2.0", "4.window=25",
                             "4.overlap=8", "4.window_prompts=" + json.dumps("\n".join(json.loads(
                                 (ROOT / "example_workflows" / "api" / "ltx2_long_video_20s.api.json").read_text())
                                 ["4"]["inputs"]["window_prompts"].splitlines()[:3]))], (49, 128, 64)),
}
# HDR from the shipped clip through a tiny HDR IC-LoRA (the IC-LoRA's layout plus hdr_transform metadata): no sound,
# so its own test below; the preview mp4 at the size asked for (generated at 128x64, cropped back), the EXR frames
HDR_EXAMPLE = ([f"lora_name={TINY['hdr_lora']}", UPSAMPLER, "8.width=120", "8.height=64", "8.frames=9"], (9, 120, 64))
# DFR's long clip on its files beside the tiny release (support.release25.DFR_FILES): 17 frames at 128x128, one
# temporal round: 33 frames at 48 fps, with stage 1's sound; its own test below (the rate is not 24)
DFR_EXAMPLE = (["8.width=128", "8.height=128", "8.frames=17"], (33, 128, 128))
# the audio-to-video examples: (LoadAudio's file, the audio condition's start), whose clip the written file carries
SOUNDS = {"ltx2_a2v_lipsync": ("ltx2_example_voice.wav", 0.0), "ltx2_a2v_music_video": ("ltx2_example_song.flac", 1.0)}


def client(server, workflow: str, *settings: str, out: Path, seed: int = 1, wait: bool = True):
    args = [sys.executable, str(CLIENT), str(ROOT / "example_workflows" / "api" / f"{workflow}.api.json"), "--server",
            server.url, "--seed", str(seed), "--out", str(out), "--timeout", "600"]
    # LTX-2.5's and the GGUF example pick their own files, which the tiny models stand under (conftest)
    for setting in (*(() if workflow.startswith(("ltx25", "ltx2_gguf", "ltx2_dub_it")) else FILES), *settings):
        args += ["--set", setting]
    if wait:
        return subprocess.run(args, capture_output=True, text=True, timeout=900)
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_pack_provides_the_example_pictures_and_sounds_in_comfyuis_input_folder(comfyui):
    shipped = sorted(p.name for p in (ROOT / "example_workflows" / "input").iterdir())
    assert shipped == ["ltx2_example_depth.mp4", "ltx2_example_first.png", "ltx2_example_last.png",
                       "ltx2_example_portrait.png", "ltx2_example_retake.mp4", "ltx2_example_song.flac",
                       "ltx2_example_voice.wav"]
    for name in shipped:
        copied = comfyui.base / "input" / name
        assert copied.read_bytes() == (ROOT / "example_workflows" / "input" / name).read_bytes()
    pictures = {name for name in shipped if name.endswith(".png")}
    assert pictures <= set(comfyui.get("/object_info/LoadImage")["LoadImage"]["input"]["required"]["image"][0])
    kind, options = comfyui.get("/object_info/LoadAudio")["LoadAudio"]["input"]["required"]["audio"]
    assert kind == "COMBO" and set(shipped) - pictures <= set(options["options"])  # a V3 node's combo


def test_every_node_is_registered_and_the_pack_imports_cleanly(comfyui):
    info = comfyui.get("/object_info")
    assert set(NODE_CLASS_MAPPINGS) <= set(info)
    assert all(info[name]["category"].startswith("LTX-2/") for name in NODE_CLASS_MAPPINGS)
    log = comfyui.log.read_text()
    assert f"custom_nodes/{PACK_FOLDER}" in log and "IMPORT FAILED" not in log
    assert TINY["checkpoint"] in info["LTX2CheckpointLoader"]["input"]["required"]["ckpt_name"][0]


def test_every_nodes_help_page_is_served_where_the_frontend_looks_and_the_scripts_once(comfyui):
    """ComfyUI's frontend (1.45) fetches a custom node's help page from /extensions/<pack folder of python_module>/
    docs/<node id>.md (after docs/<node id>/<locale>.md) and takes a text/html answer for a missing page; the pack's
    scripts are listed once (pyproject.toml has no [tool.comfy] web key registering web/ a second time)."""
    info = comfyui.get("/object_info")
    for name in NODE_CLASS_MAPPINGS:
        module = info[name]["python_module"]
        assert module == f"custom_nodes.{PACK_FOLDER}"
        url = f"{comfyui.url}/extensions/{module.split('.')[1]}/docs/{name}.md"
        with urllib.request.urlopen(url, timeout=30) as response:
            assert "text/html" not in response.headers["Content-Type"]
            assert response.read() == (ROOT / "web" / "docs" / f"{name}.md").read_bytes()
    scripts = [path for path in comfyui.get("/extensions") if path.endswith("/ltx2_parallel.js")]
    assert scripts == [f"/extensions/{PACK_FOLDER}/ltx2_parallel.js"]


def test_the_model_loader_lists_the_gguf_files_of_unet_and_the_text_projection_files(comfyui):
    """ComfyUI lists no .gguf itself: the pack lists those of diffusion_models and unet (the GGUF example runs them
    with the other examples)."""
    loader = comfyui.get("/object_info/LTX2ModelLoader")["LTX2ModelLoader"]["input"]
    assert GGUF["checkpoint"][1] in loader["required"]["transformer"][0]
    assert GGUF["text_projection"][1] in loader["optional"]["text_projection"][0]


@pytest.mark.parametrize("workflow", list(EXAMPLES))
def test_example_workflow_writes_an_mp4_with_sound(comfyui, workflow, tmp_path):
    settings, (frames, width, height) = EXAMPLES[workflow]
    run = client(comfyui, workflow, *settings, out=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "done; 0 preview images" not in run.stdout  # the sampler and the generate node send a preview per step
    (video_file,) = tmp_path.glob("*.mp4")
    with av.open(str(video_file)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert (video.frames, video.width, video.height, video.average_rate) == (frames, width, height, 24)
    written = read_audio(video_file)
    assert abs(written.seconds - frames / 24) < 0.1
    if workflow not in SOUNDS:
        assert written.samples.shape[0] == 2  # the decoded stereo
        return
    # audio-to-video: the file carries the input sound over the clip, at its own rate and channels (AAC: lossy)
    name, start = SOUNDS[workflow]
    clip = read_audio(ROOT / "example_workflows" / "input" / name, start, frames / 24)
    assert (written.samples.shape[0], written.rate) == (clip.samples.shape[0], clip.rate)
    assert abs(written.seconds - clip.seconds) < 0.05
    correlation, energy = aac_match(written, clip)
    assert correlation > 0.95 and 0.8 < energy < 1.25, (correlation, energy)


def aac_match(written: Waveform, clip: Waveform, skip: int = 1024) -> tuple[float, float]:
    """How closely an AAC-encoded copy follows a clip after its first `skip` samples (the encoder's first frame,
    which it fades in), the worst channel's: the correlation and the energy ratio (1: the same loudness)."""
    n = min(clip.samples.shape[-1], written.samples.shape[-1])
    got, want = written.samples[:, skip:n].double(), clip.samples[:, skip:n].double()
    correlations = [float(torch.corrcoef(torch.stack(pair))[0, 1]) for pair in zip(got, want)]
    energies = (got.square().mean(-1) / want.square().mean(-1)).tolist()
    return min(correlations), max(energies, key=lambda e: abs(math.log(e)))


def test_the_hdr_example_writes_exr_frames_and_an_srgb_preview(comfyui, tmp_path):
    settings, (frames, width, height) = HDR_EXAMPLE
    run = client(comfyui, "ltx2_hdr", *settings, out=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (video_file,) = tmp_path.glob("*.mp4")
    with av.open(str(video_file)) as container:
        video = container.streams.video[0]
        assert (video.frames, video.width, video.height, video.average_rate) == (frames, width, height, 24)
        assert not container.streams.audio  # HDR is video only
    folders = sorted(p for p in (comfyui.base / "output" / "ltx2").glob("hdr_*") if p.is_dir())
    names = sorted(p.name for p in folders[-1].iterdir())
    assert names == [f"frame_{i:05d}.exr" for i in range(frames)] + ["preview.mp4"]
    import OpenEXR  # the pack's requirement, in ComfyUI's Python and here

    with OpenEXR.File(str(folders[-1] / "frame_00000.exr")) as exr:
        assert exr.channels()["RGB"].pixels.shape == (height, width, 3)


def test_the_dfr_example_writes_the_clip_doubled_in_time_with_its_sound(comfyui, tmp_path):
    settings, (frames, width, height) = DFR_EXAMPLE
    run = client(comfyui, "ltx25_dfr_long_clip", *settings, out=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (video_file,) = tmp_path.glob("*.mp4")
    with av.open(str(video_file)) as container:
        video = container.streams.video[0]
        assert (video.frames, video.width, video.height, video.average_rate) == (frames, width, height, 48)
    written = read_audio(video_file)
    assert abs(written.seconds - frames / 48) < 0.1 and written.samples.abs().max() > 0


def test_the_text_to_audio_example_writes_a_flac_of_the_clips_length(comfyui, tmp_path):
    run = client(comfyui, "ltx2_t2a", "3.frames=25", "3.steps=2", out=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (sound_file,) = tmp_path.glob("*.flac")
    assert not list(tmp_path.glob("*.mp4"))
    written = read_audio(sound_file)
    assert written.samples.shape[0] == 2 and written.rate == 48000  # LTX-2.3's vocoder: stereo at 48 kHz
    assert abs(written.seconds - 25 / 24) < 0.05 and written.samples.abs().max() > 0


def test_the_text_to_audio_example_of_automatic_length_takes_the_heads_length(comfyui, tmp_path):
    """LTX-2.5's duration head (the tiny release's, beside its transformer) picks the clip: 0.9 s, 17 frames."""
    run = client(comfyui, "ltx25_t2a_auto_length", "3.steps=2", "3.min_seconds=0.5", out=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (sound_file,) = tmp_path.glob("*.flac")
    written = read_audio(sound_file)
    assert abs(written.seconds - 17 / 24) < 0.05 and written.samples.abs().max() > 0  # not the frames input's 121
    assert "duration head: 0.90 s predicted: 17 frames at 24 fps" in comfyui.log.read_text()  # ltx2_core's log


def test_a_bad_value_is_refused_before_anything_runs(comfyui, tmp_path):
    run = client(comfyui, "ltx2_t2v_one_stage", "4.width=96", "4.height=64", "4.frames=16", out=tmp_path)
    assert run.returncode == 2
    assert "node 4 (LTX2EmptyLatent)" in run.stderr and "8k+1" in run.stderr
    assert not list(tmp_path.glob("*"))


def test_a_bad_sound_is_refused_with_the_fix_before_sampling(comfyui, tmp_path):
    run = client(comfyui, "ltx2_a2v_lipsync", "4.width=96", "4.height=64", "13.start=60", out=tmp_path)
    assert run.returncode == 1
    assert "start 60 s is past the end of the sound (it lasts 5.200 s); pick an earlier start" in run.stderr
    assert not list(tmp_path.glob("*.mp4"))


def test_an_fp8_checkpoint_runs_the_example_also_streamed_and_quantize_at_load_too(comfyui, tmp_path):
    small = ["4.width=96", "4.height=64", "4.frames=9", "6.steps=2"]
    for name, settings in (("fp8", [f"1.ckpt_name={TINY['fp8_checkpoint']}"]), ("quantize", ["1.fp8=quantize"]),
                           ("fp8-streamed", [f"1.ckpt_name={TINY['fp8_checkpoint']}", "1.memory=stream"])):
        run = client(comfyui, "ltx2_t2v_one_stage", *small, *settings, out=tmp_path / name)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert list((tmp_path / name).glob("*.mp4"))


def test_a_comfyui_int8_checkpoint_runs_the_example_resident_and_streamed(comfyui, tmp_path):
    """ComfyUI's own int8 layout (comfy-kitchen's quantiser, `comfy_quant` markers) picked in the loader: its block
    linears stay int8 and compute through comfy-kitchen, resident or with every block streamed."""
    small = ["4.width=96", "4.height=64", "4.frames=9", "6.steps=2", f"1.ckpt_name={TINY['int8_checkpoint']}"]
    for name, settings in (("int8", []), ("int8-streamed", ["1.memory=stream"])):
        run = client(comfyui, "ltx2_t2v_one_stage", *small, *settings, out=tmp_path / name)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert list((tmp_path / name).glob("*.mp4"))


@pytest.mark.parametrize("workflow", ["ltx2_t2v_one_stage", "ltx2_t2v_two_gpus"])
def test_an_interrupt_stops_sampling_and_the_next_prompt_succeeds(comfyui, workflow, tmp_path):
    small = ["4.width=96", "4.height=64", "4.frames=9"]
    slow = client(comfyui, workflow, *small, "6.steps=200", out=tmp_path / "slow", seed=11, wait=False)
    lines = []
    for line in slow.stdout:  # wait until sampling is under way
        lines.append(line)
        if "step" in line:
            break
    assert comfyui.post("/interrupt") == 200
    assert slow.wait(timeout=120) == 3, "".join(lines) + slow.stdout.read() + slow.stderr.read()
    assert "interrupted" in slow.stderr.read()
    start = time.monotonic()
    run = client(comfyui, workflow, *small, "6.steps=2", out=tmp_path / "next", seed=12)
    assert run.returncode == 0, run.stderr[-2000:]
    assert list((tmp_path / "next").glob("*.mp4")) and time.monotonic() - start < 300


def test_the_workers_are_reused_across_prompts(comfyui, tmp_path):
    """Two prompts on the two-GPU example: the same worker processes serve both (ComfyUI caches the loader)."""
    small = ["4.width=96", "4.height=64", "4.frames=9", "6.steps=2"]
    pids = []
    for seed in (21, 22):
        run = client(comfyui, "ltx2_t2v_two_gpus", *small, out=tmp_path / str(seed), seed=seed)
        assert run.returncode == 0, run.stderr[-2000:]
        pids.append(_workers_of(comfyui))
    assert len(pids[0]) == 2 and pids[0] == pids[1]


def test_free_releases_the_models_and_stops_the_workers_and_the_next_prompt_loads_them_again(comfyui, tmp_path):
    """`POST /free` (the UI's "unload models" / "free memory"): the pack's models and workers go as ComfyUI's do;
    the next prompt loads them again, with the output cache reset (free_memory) or kept (unload_models only)."""
    small = ["4.width=96", "4.height=64", "4.frames=9", "6.steps=2"]
    pids = []
    for seed, body in ((31, {"unload_models": True, "free_memory": True}), (32, {"unload_models": True}), (33, None)):
        run = client(comfyui, "ltx2_t2v_two_gpus", *small, out=tmp_path / str(seed), seed=seed)
        assert run.returncode == 0, run.stderr[-2000:]
        pids.append(_workers_of(comfyui))
        assert len(pids[-1]) == 2
        if body is not None:
            assert comfyui.post("/free", body) == 200
            deadline = time.monotonic() + 60
            while _workers_of(comfyui) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert not _workers_of(comfyui)
    assert not pids[0] & pids[1] and not pids[1] & pids[2]


def _workers_of(comfyui) -> set[int]:
    """The pids of the server's spawned worker processes (its children started by multiprocessing's spawn)."""
    found = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
            command = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if parent == str(comfyui.pid) and b"spawn_main" in command:
            found.add(int(proc.name))
    return found
