"""ComfyUI's SamplerCustomAdvanced against LTX-2 SamplerCustomAdvanced (fast) on the SAME native MODEL, in one
ComfyUI process (its modules imported, no server): the node swap of nodes/native_sampler.py, timed
(docs/performance.md "Native swap").

    $COMFYUI_PYTHON bench/native_swap.py --comfyui $COMFYUI_PATH --checkpoint ltx-2.3-22b-distilled.safetensors \\
        [--width 768 --height 512 --frames 121 --fps 24] [--cfg 3] [--sigmas "1.0, ..., 0.0"] [--repeats 5] \\
        [--out native_swap.json]
    $COMFYUI_PYTHON bench/native_swap.py --quick [--out FILE]   # CPU smoke run: the tiny bundle, 96x64, 9 frames

Run it with ComfyUI's Python (it needs ComfyUI's `comfy` package and torch). One CheckpointLoaderSimple MODEL, one
CFGGuider (cfg `--cfg` with a negative; cfg 1: BasicGuider's single pass is not what is timed), ManualSigmas
(default: the distilled 8-step table), KSamplerSelect euler, RandomNoise `--seed`, the latent from
EmptyLTXVLatentVideo + LTXVEmptyLatentAudio (LTXVAudioVAELoader of the checkpoint) + LTXVConcatAVLatent. The prompts
are random tensors of the native shapes (connector outputs, unflagged: concat of the video and audio context widths,
1024 tokens, `frame_rate` set), so no text encoder is needed. Without `--checkpoint` the tiny native bundle
(tests/support/native_files.py) is written to a temporary folder by `--bundle-python` (the project's own Python:
writing it needs the reference ltx_core, which ComfyUI's Python lacks).

Per sampler: the median wall time of the whole node call over `--repeats` runs after one warm-up each (the two
samplers alternate; torch.cuda.synchronize around each run on CUDA), per step, the peak device memory
(torch.cuda.max_memory_allocated, reset before each run: it includes the resident weights), and ours / native.
The two results are NOT comparable value for value: native draws its noise with comfy.sample.prepare_noise on the
CPU from the seed, ours from our generator seeded with it; their statistics are printed side by side only.
On CPU ComfyUI runs with --cpu; there the numbers are a smoke run, not a speed claim.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from native_report import table, write_json

ROOT = Path(__file__).resolve().parents[1]
PACK = "ltx2_native_swap_pack"  # the pack's package name here (ComfyUI's top-level `nodes` keeps its own)
DISTILLED_SIGMAS = "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"
TOKENS = 1024  # native's least text length (nodes/native_conditioning.py MIN_TOKENS)
QUICK = {"width": 96, "height": 64, "frames": 9, "repeats": 2}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comfyui", default=os.environ.get("COMFYUI_PATH"),
                        help="ComfyUI's folder (default: $COMFYUI_PATH)")
    parser.add_argument("--checkpoint", help="a native LTX-2 checkpoint file (default: the tiny bundle, written to a "
                        "temporary folder)")
    parser.add_argument("--released-layers", type=int, default=0, metavar="N",
                        help="instead of a checkpoint: the release's transformer at its released widths, N of its 48 "
                        "blocks, random weights made on the device (bench/native_released.py), loaded by Load "
                        "Diffusion Model")
    parser.add_argument("--version", default="2.3", choices=("2.0", "2.3", "2.5"),
                        help="the release --released-layers builds (default 2.3)")
    parser.add_argument("--easycache", type=float, default=0.0, metavar="THRESHOLD",
                        help="also time both samplers on the MODEL patched by ComfyUI's EasyCache node (this "
                        "reuse_threshold, its default start 0.15 and end 0.95); 0: off")
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--frames", type=int, default=121)
    parser.add_argument("--fps", type=int, default=24)
    parser.add_argument("--cfg", type=float, default=3.0)
    parser.add_argument("--sigmas", default=DISTILLED_SIGMAS, help="ManualSigmas' text")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per sampler after one warm-up each")
    parser.add_argument("--cpu", action="store_true", help="run ComfyUI with --cpu (the default without CUDA)")
    parser.add_argument("--quick", action="store_true", help="CPU smoke run: the tiny bundle, 96x64, 9 frames, "
                        "2 repeats (unless given)")
    parser.add_argument("--bundle-python", default=os.environ.get("LTX2_PYTHON", "python"),
                        help="without --checkpoint: the project's own Python (with tests/requirements.txt) that "
                        "writes the tiny bundle (default: $LTX2_PYTHON or `python`)")
    parser.add_argument("--out", help="JSON results file")
    args = parser.parse_args(argv)
    if args.quick:
        if args.checkpoint:
            parser.error("--quick runs the tiny bundle (or --released-layers); leave --checkpoint out")
        args.cpu = True
        for key, value in QUICK.items():  # the sizes and repeats given explicitly stay
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    if not args.comfyui or not (Path(args.comfyui) / "main.py").is_file():
        parser.error(f"--comfyui {args.comfyui!r} is not ComfyUI's folder (with main.py); pass it or set COMFYUI_PATH")
    if args.checkpoint and args.released_layers:
        parser.error("give --checkpoint or --released-layers, not both")
    if not 0 <= args.released_layers <= 48 or args.easycache < 0:
        parser.error("--released-layers must be 0 to 48 and --easycache at least 0")
    if args.checkpoint and not Path(args.checkpoint).is_file():
        parser.error(f"--checkpoint {args.checkpoint}: no such file")
    if args.width % 32 or args.height % 32 or args.width < 64 or args.height < 64:
        parser.error(f"--width / --height must be multiples of 32, at least 64 (got {args.width}x{args.height})")
    if args.frames < 1 or (args.frames - 1) % 8:
        parser.error(f"--frames must be 8k + 1 (9, 17, ..., 121), got {args.frames}")
    if args.repeats < 1 or args.fps < 1 or not args.cfg > 0:
        parser.error("--repeats and --fps must be at least 1, --cfg above 0")
    return args


def start_comfyui(path: str, cpu: bool) -> None:
    """ComfyUI's modules importable and its arguments parsed (--cpu or none), as its main.py would, no server."""
    sys.path.insert(0, path)
    argv, sys.argv = sys.argv, [sys.argv[0]] + (["--cpu"] if cpu else [])
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.cli_args  # parses the arguments now

    sys.argv = argv
    import comfy.utils

    comfy.utils.set_progress_bar_enabled(False)  # no tqdm bar in native's loop (ours has none outside a server)


def load_pack():
    """The pack as ComfyUI loads it (a package from its folder, under another name than ComfyUI's `nodes`)."""
    spec = importlib.util.spec_from_file_location(PACK, ROOT / "__init__.py", submodule_search_locations=[str(ROOT)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACK] = module
    spec.loader.exec_module(module)
    return sys.modules[PACK + ".nodes"]


def tiny_checkpoint(folder: str, python: str) -> str:
    """The tiny native bundle, written by `python`: the project's own Python with the test requirements (the
    reference ltx_core, pytest), which ComfyUI's Python lacks."""
    path = Path(folder) / "tiny-ltx-2.3-native.safetensors"
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/tests']\n"
            "from pathlib import Path\nfrom support.native_files import write_native_checkpoint\n"
            "write_native_checkpoint(Path(sys.argv[2]))")
    done = subprocess.run([python, "-c", code, str(ROOT), str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not path.is_file():
        raise SystemExit(f"writing the tiny bundle with {python} failed (give --bundle-python the project's Python "
                         f"with tests/requirements.txt, or --checkpoint):\n{done.stderr[-2000:]}")
    return str(path)


def summary(tensor) -> dict:
    t = tensor.float()
    return {"shape": list(t.shape), "mean": t.mean().item(), "std": t.std().item(), "abs_max": t.abs().max().item()}


def run_bench(args: argparse.Namespace, checkpoint: str) -> dict:
    import folder_paths
    import torch

    folder_paths.set_input_directory(tempfile.mkdtemp(prefix="native_swap_input_"))  # the pack copies examples in
    kind = "diffusion_models" if args.released_layers else "checkpoints"
    folder_paths.add_model_folder_path(kind, os.path.dirname(os.path.abspath(checkpoint)))
    name = os.path.basename(checkpoint)
    pack = load_pack()
    import comfy.model_management
    from comfy_extras.nodes_custom_sampler import (
        CFGGuider,
        KSamplerSelect,
        ManualSigmas,
        RandomNoise,
        SamplerCustomAdvanced,
    )
    from comfy_extras.nodes_easycache import EasyCacheNode
    from comfy_extras.nodes_lt import EmptyLTXVLatentVideo, LTXVConcatAVLatent
    from comfy_extras.nodes_lt_audio import LTXVAudioVAELoader, LTXVEmptyLatentAudio
    from native_released import SkippedSteps, released_audio_latent

    from ltx2_core.types import TextEmbeddings
    from nodes import CheckpointLoaderSimple, UNETLoader  # ComfyUI's nodes.py

    native_configs = sys.modules[PACK + ".nodes.native_model"].native_configs
    to_native = sys.modules[PACK + ".nodes.native_conditioning"].to_native
    split = sys.modules[PACK + ".nodes.interop"].split

    if args.released_layers:
        model = UNETLoader().load_unet(name, "default")[0]
        audio = released_audio_latent(args.frames, args.fps, comfy.model_management.intermediate_device())
    else:
        model = CheckpointLoaderSimple().load_checkpoint(name)[0]
        (audio_vae,) = LTXVAudioVAELoader.execute(name).result
        (audio,) = LTXVEmptyLatentAudio.execute(args.frames, args.fps, 1, audio_vae).result
    config, _ = native_configs(model.model.model_config.unet_config)
    generator = torch.Generator().manual_seed(args.seed)

    def prompt():
        video = torch.randn(1, TOKENS, config.video.context_dim, generator=generator)
        audio = torch.randn(1, TOKENS, config.audio.context_dim, generator=generator)
        return to_native(TextEmbeddings(video, audio), args.fps)

    positive, negative = prompt(), prompt()
    models = {"": model}
    if args.easycache:
        models["easycache"] = EasyCacheNode.execute(model, args.easycache, 0.15, 0.95, False).result[0]
    (noise,) = RandomNoise.execute(args.seed).result
    (sampler,) = KSamplerSelect.execute("euler").result
    (sigmas,) = ManualSigmas.execute(args.sigmas).result
    (video,) = EmptyLTXVLatentVideo.execute(args.width, args.height, args.frames, 1).result
    (latent,) = LTXVConcatAVLatent.execute(video, audio).result
    steps = sigmas.shape[-1] - 1
    if steps < 1:
        raise ValueError(f"--sigmas {args.sigmas!r}: give at least two values, the last 0")
    ours_node = pack.LTX2SamplerCustomAdvanced()
    runners = {}
    for suffix, patched in models.items():
        (guider,) = CFGGuider.execute(patched, positive, negative, args.cfg).result
        tag = f"+{suffix}" if suffix else ""
        runners["native" + tag] = lambda g=guider: SamplerCustomAdvanced.execute(noise, g, sampler, sigmas,
                                                                                 latent).result[0]
        runners["ours" + tag] = lambda g=guider: ours_node.sample(noise, g, sampler, sigmas, latent)[0]
    cuda = torch.cuda.is_available() and not args.cpu

    def timed(run) -> tuple[float, int | None, dict]:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        out = run()
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return seconds, torch.cuda.max_memory_allocated() if cuda else None, out

    results = {key: {"times": [], "peaks": [], "skipped": []} for key in runners}
    outputs, refused = {}, {}
    for key, run in runners.items():  # warm-up: model load, first kernels; a sampler may refuse the patched MODEL
        try:
            outputs[key] = timed(run)[2]
        except ValueError as error:
            refused[key] = str(error)
    for _ in range(args.repeats):
        for key, run in runners.items():
            if key in refused:
                continue
            with SkippedSteps() as log:
                seconds, peak, outputs[key] = timed(run)
            results[key]["times"].append(seconds)
            results[key]["peaks"].append(peak)
            results[key]["skipped"] += [skipped for skipped, _ in log.runs]
    rows = {}
    for key, found in results.items():
        if key in refused:
            rows[key] = {"refused": refused[key]}
            continue
        median = statistics.median(found["times"])
        peaks = [p for p in found["peaks"] if p is not None]
        video_out, audio_out = split(outputs[key])
        rows[key] = {"median_s": median, "per_step_s": median / steps, "times_s": found["times"],
                     "peak_mib": max(peaks) / 2**20 if peaks else None,
                     "video": summary(video_out), "audio": summary(audio_out)}
        if found["skipped"]:
            rows[key]["easycache_skipped"] = found["skipped"]
    ratio = _ratio(rows, "ours", "native", cuda)
    if args.easycache:
        ratio = {**ratio, "with_easycache": _ratio(rows, "ours+easycache", "native+easycache", cuda),
                 "ours_easycache_over_native": _ratio(rows, "ours+easycache", "native", cuda)}
    device = torch.cuda.get_device_name() if cuda else f"CPU ({platform.processor() or platform.machine()})"
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "torch": torch.__version__, "comfyui": _comfyui_version(args.comfyui),
            "checkpoint": name, "dtype": str(model.model.get_dtype()), "width": args.width, "height": args.height,
            "frames": args.frames, "fps": args.fps, "cfg": args.cfg, "sigmas": [float(s) for s in sigmas],
            "steps": steps, "sampler": "euler", "seed": args.seed, "repeats": args.repeats, "quick": args.quick,
            "released_layers": args.released_layers, "easycache": args.easycache or None,
            "same_noise": False, "samplers": rows, "ours_over_native": ratio}


def _ratio(rows: dict, ours: str, native: str, cuda: bool) -> dict | None:
    """ours / native time and peak (below 1: ours is faster / smaller); None where either refused."""
    a, b = rows.get(ours, {}), rows.get(native, {})
    if "median_s" not in a or "median_s" not in b:
        return None
    return {"time": a["median_s"] / b["median_s"], "peak": a["peak_mib"] / b["peak_mib"] if cuda else None}


def _comfyui_version(path: str) -> str | None:
    file = Path(path) / "comfyui_version.py"
    text = file.read_text() if file.is_file() else ""
    return next((line.split("=")[1].strip().strip("\"'") for line in text.splitlines()
                 if line.startswith("__version__")), None)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        raise SystemExit("run this with ComfyUI's Python ($COMFYUI_PYTHON): it needs torch and ComfyUI's modules")
    args.cpu = args.cpu or not torch.cuda.is_available()
    start_comfyui(os.path.abspath(args.comfyui), args.cpu)
    sys.path += [str(ROOT), str(ROOT / "tests")]  # native_released, suite_models; after ComfyUI's own `nodes`
    with tempfile.TemporaryDirectory(prefix="native_swap_") as folder:
        if args.released_layers:
            from native_released import write_released_transformer

            device = torch.device("cpu" if args.cpu else "cuda")
            checkpoint = str(write_released_transformer(Path(folder), args.version, args.released_layers, device))
        else:
            checkpoint = args.checkpoint or tiny_checkpoint(folder, args.bundle_python)
        report = run_bench(args, checkpoint)
    print(table(report))
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
