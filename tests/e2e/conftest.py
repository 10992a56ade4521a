"""A real ComfyUI server for the end-to-end tests: the shared ComfyUI 0.26.0 (`../shared/comfyui/setup.sh` prints
COMFYUI_PATH and COMFYUI_PYTHON; `.ci/run` exports them), started on 127.0.0.1 with a throw-away base directory,
the pack (and the test-only node of tests/e2e/dump_node) linked into its custom_nodes/ and tiny random-weight model
files in its models/ folders. Without those two variables every test here is skipped."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest

from support.comfy_quant import write_comfy_quantised
from support.fp8_files import write_fp8_checkpoint
from support.model_files import write_lora, write_upsampler
from support.native_files import write_native_checkpoint
from support.release25 import write_dfr_files, write_release25

ROOT = Path(__file__).resolve().parents[2]
PACK_FOLDER = "ComfyUI-LTX2-Fast"
DUMP_NODE_FOLDER = "ltx2-e2e-dump-node"  # tests/e2e/dump_node: the test-only E2E Save Tensors node
# the tiny files, by the name a user would pick in each model folder
TINY = {"checkpoint": "tiny-ltx-2.3.safetensors", "text_encoder": "tiny-gemma-3.safetensors",
        "upsampler": "tiny-upscaler-x2.safetensors", "lora": "tiny-distilled-lora.safetensors",
        "fp8_checkpoint": "tiny-ltx-2.3-fp8.safetensors", "misplaced": "gemma_3_12B_it_misplaced.safetensors",
        "ic_lora": "ltx2_example_tiny_ic_lora.safetensors", "int8_checkpoint": "tiny-ltx-2.3-int8.safetensors",
        "native_checkpoint": "tiny-ltx-2.3-native.safetensors", "hdr_lora": "tiny-hdr-ic-lora.safetensors",
        "dub_it_lora": "tiny-ltx-2.5-dub-it-ic-lora.safetensors",  # an IC-LoRA of the tiny 2.5 model (Dub-It example)
        # ComfyUI's quantiser's layouts of the native bundle (each with its dequantised twin, "twin-" + name)
        "native_int8": "tiny-ltx-2.3-native-int8.safetensors", "native_fp8": "tiny-ltx-2.3-native-fp8.safetensors"}  # ComfyUI's own loaders read it (support/native_files.py)
# the tiny 2.3 GGUF model: field -> (models folder, name)
# (the names the GGUF example picks: the tiny model stands in for a user's LTX-2.3 distilled Q4_K_M conversion, whose
# rows too small for K blocks the writer keeps in Q8_0 / F16)
GGUF = {"checkpoint": ("unet", "ltx-2.3-22b-distilled-Q4_K_M.gguf"), "vae": ("vae", "LTX23_video_vae_bf16.safetensors"),
        "audio_vae": ("vae", "LTX23_audio_vae_bf16.safetensors"),
        "text_projection": ("text_encoders", "ltx-2.3-22b_embeddings_connector_bf16.safetensors")}
# GGUFs in models/unet that do not load: a download cut short, a conversion of another family
BAD_GGUF = {"truncated": "ltx-2.3-22b-dev-Q4_K_M-partial.gguf", "flux": "flux1-dev-Q4_K_S.gguf"}


class Server(NamedTuple):
    url: str
    base: Path
    log: Path
    pid: int

    def get(self, route: str) -> dict:
        with urllib.request.urlopen(self.url + route, timeout=30) as response:
            return json.load(response)

    def post(self, route: str, body: dict | None = None) -> int:
        request = urllib.request.Request(self.url + route, json.dumps(body or {}).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status


def _comfyui() -> tuple[Path, Path]:
    path, python = os.environ.get("COMFYUI_PATH"), os.environ.get("COMFYUI_PYTHON")
    if not path or not python or not (Path(path) / "main.py").is_file():
        pytest.skip("no ComfyUI: set COMFYUI_PATH and COMFYUI_PYTHON (../shared/comfyui/setup.sh prints them)")
    return Path(path), Path(python)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tiny_models(base: Path, tiny_checkpoints: dict, gemma_files: tuple) -> dict[str, Path]:
    """The tiny 2.3 bundle, its Gemma, upsampler, distilled LoRA and IC-LoRA under their `TINY` names: what the
    LTX-2.0/2.3 example workflows pick. Returns the model folders by name."""
    folders = {name: base / "models" / name for name in ("checkpoints", "text_encoders", "loras",
                                                         "latent_upscale_models")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    (folders["checkpoints"] / TINY["checkpoint"]).symlink_to(tiny_checkpoints["2.3"])
    (folders["text_encoders"] / TINY["text_encoder"]).symlink_to(gemma_files[0])
    write_upsampler(folders["latent_upscale_models"] / TINY["upsampler"], version="2.3")
    write_lora(folders["loras"] / TINY["lora"], seed=1, version="2.3")
    write_lora(folders["loras"] / TINY["hdr_lora"], seed=4, version="2.3", metadata={"hdr_transform": "logc3"})
    # the control example's IC-LoRA for the tiny model (tools/make_example_inputs.py), as a user puts one in loras
    (folders["loras"] / TINY["ic_lora"]).symlink_to(ROOT / "example_workflows" / "loras" / TINY["ic_lora"])
    return folders


def _models(base: Path, tiny_checkpoints: dict, gemma_files: tuple) -> None:
    folders = _tiny_models(base, tiny_checkpoints, gemma_files)
    write_fp8_checkpoint(tiny_checkpoints["2.3"], folders["checkpoints"] / TINY["fp8_checkpoint"], "official")
    # ComfyUI's int8 (tensorwise, comfy_quant-marked) layout of the same bundle, as its quantiser writes it
    write_comfy_quantised(tiny_checkpoints["2.3"], folders["checkpoints"] / TINY["int8_checkpoint"], "int8_tensorwise")
    native = write_native_checkpoint(folders["checkpoints"] / TINY["native_checkpoint"])
    for name, fmt in (("native_int8", "int8_tensorwise"), ("native_fp8", "float8_e4m3fn")):
        write_comfy_quantised(native, folders["checkpoints"] / TINY[name], fmt)
    (folders["checkpoints"] / TINY["misplaced"]).symlink_to(gemma_files[0])  # a Gemma file in the checkpoint slot
    write_release25(base / "models")  # LTX-2.5's files under their released names, as its examples pick them
    write_dfr_files(base / "models")  # and DFR's, not public yet, under the names its example gives them
    write_lora(folders["loras"] / TINY["dub_it_lora"], seed=7, version="2.5",
               metadata={"reference_downscale_factor": "1"})  # the Dub-It IC-LoRA is not public: its layout
    _gguf_model(base / "models")


def _gguf_model(models: Path) -> None:
    """The tiny 2.3 GGUF (in models/unet, where ComfyUI-GGUF users keep them) with its VAE files and its text
    projection file (ComfyUI's embeddings connector layout), under the names `GGUF` gives."""
    import torch

    from support.gguf_files import write_gguf, write_gguf_model

    written = write_gguf_model(models.parent / "gguf-files", "2.3", connectors=True)
    for field, (folder, name) in GGUF.items():
        (models / folder).mkdir(parents=True, exist_ok=True)
        (models / folder / name).symlink_to(written[field])
    good = written["checkpoint"].read_bytes()
    (models / "unet" / BAD_GGUF["truncated"]).write_bytes(good[: len(good) // 2])
    write_gguf(models / "unet" / BAD_GGUF["flux"], {"double_blocks.0.img_attn.proj.weight": torch.randn(32, 64)},
               arch="flux")


@pytest.fixture(scope="session")
def comfyui(tmp_path_factory, tiny_checkpoints, gemma_files):
    path, python = _comfyui()
    base = _base(tmp_path_factory.mktemp("comfyui"))
    _models(base, tiny_checkpoints, gemma_files)
    yield from _serve(path, python, base)


# the limited server's data-segment limit (RLIMIT_DATA: heap, anonymous mappings and thread stacks, which a tensor's
# memory is; an address-space limit would count torch's reserved mappings too): ComfyUI with the pack holds 1.2 GB of
# it idle and 2.4 GB once it has run a prompt, so about 1 GB is left to a prompt
DATA_LIMIT = 35 * 10**8


@pytest.fixture(scope="session")
def limited_comfyui(tmp_path_factory, tiny_checkpoints, gemma_files):
    """A second server (the LTX-2.0/2.3 tiny models only) started under `prlimit --data=DATA_LIMIT`: what a
    request may allocate is bounded, so one that does not fit fails there instead of taking the machine's RAM."""
    path, python = _comfyui()
    base = _base(tmp_path_factory.mktemp("comfyui_limited"))
    _tiny_models(base, tiny_checkpoints, gemma_files)
    yield from _serve(path, python, base, limit=("prlimit", f"--data={DATA_LIMIT}"))


def _base(base: Path) -> Path:
    """A throw-away base directory with the pack and the test-only nodes in its custom_nodes."""
    (base / "custom_nodes").mkdir()
    (base / "gguf-files").mkdir()
    (base / "custom_nodes" / PACK_FOLDER).symlink_to(ROOT)
    # test-only: ComfyUI's own LTX-2 text path at the tiny sizes (tiny_native_text/__init__.py)
    (base / "custom_nodes" / "ltx2_test_tiny_native_text").symlink_to(ROOT / "tests" / "e2e" / "tiny_native_text")
    (base / "custom_nodes" / DUMP_NODE_FOLDER).symlink_to(ROOT / "tests" / "e2e" / "dump_node")
    return base


def _serve(path: Path, python: Path, base: Path, limit: tuple[str, ...] = ()):
    """Runs ComfyUI on a free port (under the `limit` command, e.g. prlimit) until the session ends."""
    port, log = _free_port(), base / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*limit, str(python), "main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(port),
             "--base-directory", str(base), "--database-url", f"sqlite:///{base}/comfyui.db", "--disable-auto-launch"],
            cwd=path, stdout=out, stderr=subprocess.STDOUT,
            env=os.environ | {"LTX2_TINY_NATIVE_SIZES": _tiny_sizes()})
    server = Server(f"http://127.0.0.1:{port}", base, log, process.pid)
    try:
        _wait_until_up(server, process)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _tiny_sizes() -> str:
    """The tiny Gemma's and the native bundle's text sizes, for the test-only tiny_native_text folder."""
    from ltx2_core import TransformerConfig
    from ltx2_core.model.text.config import TextConfig
    from support.configs import TINY_GEMMA, TINY_GEMMA_FEATURES

    text = TextConfig.tiny(TransformerConfig.tiny("2.3"))
    return json.dumps({"gemma": TINY_GEMMA, "features": TINY_GEMMA_FEATURES, "video": text.video.width,
                       "audio": text.audio.width})


def _wait_until_up(server: Server, process: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"ComfyUI exited with {process.returncode}:\n{server.log.read_text()[-3000:]}")
        try:
            server.get("/object_info/LTX2Sampler")
            return
        except OSError:
            time.sleep(1)
    pytest.fail(f"ComfyUI did not answer within {timeout:g} s:\n{server.log.read_text()[-3000:]}")
