"""The only module of the pack that imports ComfyUI (`folder_paths`, `comfy.*`).

Inside ComfyUI it resolves model files from ComfyUI's folders, drives ComfyUI's progress bar, gives the samplers
ComfyUI's interrupt flag (`interrupt_requested`: an interrupt from the UI or `POST /interrupt` stops the run before
the next transformer block) and asks ComfyUI to free the memory it holds
before a large model loads. Outside ComfyUI (tests, scripts) every node still works: a file input is a path, there
is no progress bar, no interrupt and nothing to free.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator

import numpy as np
import torch

from ltx2_core.errors import Interrupted

try:
    import comfy.model_management as model_management
    import comfy.utils as comfy_utils
    import folder_paths
    import server
    from aiohttp import web
    from PIL import Image
except ImportError:  # not running inside ComfyUI
    model_management = comfy_utils = folder_paths = server = web = Image = None
try:
    from comfy.nested_tensor import NestedTensor  # the joint audio + video latent's samples
except ImportError:
    NestedTensor = None
try:
    from comfy_execution.validation import validate_node_input  # ComfyUI's rule for a link's type
except ImportError:
    validate_node_input = None

IN_COMFYUI = folder_paths is not None
PREVIEW_SCALE = 8  # a latent cell is 32 px: previews at a quarter of the video's size


def file_options(folder: str) -> list[str]:
    """The files of one of ComfyUI's model folders (`checkpoints`, `loras`, ...) for a combo input; [] outside."""
    return sorted(folder_paths.get_filename_list(folder)) if IN_COMFYUI else []


def gguf_options() -> list[str]:
    """The `.gguf` files of ComfyUI's diffusion_models folders (models/diffusion_models and models/unet, where
    ComfyUI-GGUF keeps them), by their name in the folder, as a combo input lists them; [] outside ComfyUI."""
    return sorted(_gguf_files()) if IN_COMFYUI else []


def _gguf_files() -> dict[str, str]:
    """Name -> full path of each `.gguf` under the diffusion_models folders (links followed, as ComfyUI lists)."""
    found: dict[str, str] = {}
    for root in folder_paths.get_folder_paths("diffusion_models"):
        for parent, _, files in os.walk(root, followlinks=True):
            for file in files:
                if file.lower().endswith(".gguf"):
                    path = os.path.join(parent, file)
                    found.setdefault(os.path.relpath(path, root).replace(os.sep, "/"), path)
    return found


def model_folders_with(folder: str, marker: str) -> list[str]:
    """Sub-folders of a model folder that hold `marker` (e.g. Hugging Face model folders with config.json)."""
    if not IN_COMFYUI:
        return []
    found = []
    for root in folder_paths.get_folder_paths(folder):
        if os.path.isdir(root):
            found += [name for name in os.listdir(root) if os.path.isfile(os.path.join(root, name, marker))]
    return sorted(found)


def model_path(folder: str, name: object, marker: str | None = None) -> str:
    """The full path of `name`, a file ComfyUI lists in one of its model folders (`checkpoints`, `loras`, ...; a
    `.gguf` of diffusion_models as `gguf_options` lists it) or,
    with `marker`, a sub-folder of it holding that file (a Hugging Face model folder). Anything else (an absolute
    path, `..`, a name ComfyUI does not list) is refused without a look at the disk, so an API caller learns nothing
    about files outside the folders. Outside ComfyUI `name` is a path."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"pick a file from models/{folder} (got {type(name).__name__} {str(name)[:40]!r})")
    if IN_COMFYUI:
        if name in folder_paths.get_filename_list(folder):
            return folder_paths.get_full_path_or_raise(folder, name)
        if folder == "diffusion_models" and name.lower().endswith(".gguf") and name in _gguf_files():
            return _gguf_files()[name]
        if marker is not None and name in model_folders_with(folder, marker):
            for root in folder_paths.get_folder_paths(folder):
                if os.path.isfile(os.path.join(root, name, marker)):
                    return os.path.join(root, name)
        if os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
            raise ValueError(f"a file input takes a name from models/{folder}, not a path")
        raise FileNotFoundError(f"{name[:80]!r} is not in models/{folder}: put the file there and pick it in the list "
                                "(refresh the page after adding it)")
    if not os.path.exists(name):
        raise FileNotFoundError(f"{name}: no such file (outside ComfyUI a model input is a path)")
    return name


def link_fits(received: object, expected: object) -> bool:
    """Whether an output of type `received` may be linked to an input of type `expected`, by ComfyUI's own rule
    (its `validate_node_input`); outside ComfyUI the same rule's core: equal, "*", or a common type of comma lists."""
    if validate_node_input is not None:
        return validate_node_input(received, expected)
    if received == expected or "*" in (received, expected):
        return True
    if not isinstance(received, str) or not isinstance(expected, str):
        return False
    return bool({t.strip() for t in received.split(",")} & {t.strip() for t in expected.split(",")})


class _Nested:
    """Outside ComfyUI: what our nodes read of ComfyUI's NestedTensor (its `tensors`, `unbind`, the first's shape)."""

    is_nested = True

    def __init__(self, tensors) -> None:
        self.tensors = list(tensors)

    def unbind(self) -> list[torch.Tensor]:
        return self.tensors

    @property
    def shape(self) -> torch.Size:
        return self.tensors[0].shape


def nested_tensor(tensors) -> object:
    """ComfyUI's NestedTensor of `tensors` (the joint audio + video latent's samples); a stand-in outside ComfyUI."""
    return NestedTensor(tensors) if NestedTensor is not None else _Nested(tensors)


def torch_device() -> torch.device:
    """ComfyUI's compute device, or CUDA when available outside it."""
    if IN_COMFYUI:
        return model_management.get_torch_device()
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


_unload_comfy_models = model_management.unload_all_models if IN_COMFYUI else None  # before on_unload_all_models


def free_memory() -> None:
    """Before a large model loads: ComfyUI unloads the models it holds (not the pack's) and empties its cache."""
    if IN_COMFYUI:
        _unload_comfy_models()
        model_management.soft_empty_cache()


def on_unload_all_models(release: Callable[[], None]) -> None:
    """Calls `release()` whenever ComfyUI unloads all its models (`POST /free`, `--disable-smart-memory` after each
    prompt, an out-of-memory error), so the pack's models and workers go with ComfyUI's. Nothing outside ComfyUI.
    ComfyUI has no hook for this: its function is wrapped (its callers look it up on the module)."""
    if not IN_COMFYUI:
        return
    unload = model_management.unload_all_models

    def unload_all_models() -> None:
        release()
        unload()

    model_management.unload_all_models = unload_all_models


def progress_bar(total: int, node_id: str | None, preview: Callable[[], np.ndarray | None] | None = None
                 ) -> Callable[[int, int], None] | None:
    """A per-step callback (steps done, total) for ComfyUI's progress bar, showing `preview()` (an RGB uint8 image,
    or None when none is ready) with it; None outside ComfyUI. ComfyUI's hook checks for an interrupt on every
    update, so a cancelled run stops before its next step."""
    if not IN_COMFYUI:
        return None
    bar = comfy_utils.ProgressBar(total, node_id=node_id)

    def update(done: int, steps: int) -> None:
        image = preview() if preview is not None else None
        if image is not None:
            picture = Image.fromarray(image)
            image = ("JPEG", picture.resize((picture.width * PREVIEW_SCALE, picture.height * PREVIEW_SCALE)), None)
        bar.update_absolute(done, steps, image)

    return update


def load_native_model(patcher, video_shape: tuple[int, ...]) -> tuple[torch.nn.Module, torch.device, torch.dtype]:
    """ComfyUI's MODEL (a ModelPatcher) loaded for a run as its own samplers load it: its weight patches (LoRAs)
    applied and room made on the device for a batch of 2 of `video_shape`, partly loaded when it does not fit ->
    (its diffusion model, the compute device, the compute dtype). Outside ComfyUI the model stays where it is."""
    model = patcher.model
    if IN_COMFYUI:
        memory = patcher.memory_required([2 * video_shape[0], *video_shape[1:]])
        model_management.load_models_gpu([patcher], memory_required=memory, minimum_memory_required=memory)
        device = torch.device(patcher.load_device)
    else:
        device = next(model.diffusion_model.parameters()).device
    dtype = getattr(model, "manual_cast_dtype", None) or model.get_dtype()
    return model.diffusion_model, device, dtype


def interrupt_requested() -> bool:
    """Whether the user asked ComfyUI to stop (its flag stays set until raised); False outside ComfyUI."""
    return IN_COMFYUI and model_management.processing_interrupted()


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """Around sampling (here, or on the pack's workers): a run stopped because of ComfyUI's interrupt flag (read
    before every transformer block) ends as ComfyUI's own interrupt exception, so ComfyUI reports
    `execution_interrupted` rather than an error."""
    try:
        yield
    except Interrupted:
        if IN_COMFYUI:
            model_management.throw_exception_if_processing_interrupted()
        raise


def add_json_route(path: str, produce: Callable[..., object], query: bool = False) -> None:
    """A read-only `GET path` on ComfyUI's server answering `produce()` as JSON (with `query`: `produce(params)`,
    the request's query parameters as a dict of strings); nothing outside ComfyUI or when ComfyUI's modules run
    without its server (a script importing them in-process: no `PromptServer.instance`)."""
    if not IN_COMFYUI or getattr(server.PromptServer, "instance", None) is None:
        return

    async def handler(request):
        return web.json_response(produce(dict(request.query)) if query else produce())

    server.PromptServer.instance.routes.get(path)(handler)


def provide_inputs(folder: str) -> list[str]:
    """Copies the files of `folder` (the example workflows' pictures and sounds) into ComfyUI's input folder where
    absent (each whole or not at all), so the LoadImage and LoadAudio nodes of a dragged-in example find them;
    returns the names copied ([] outside ComfyUI)."""
    if not IN_COMFYUI:
        return []
    target, copied = folder_paths.get_input_directory(), []
    for name in sorted(os.listdir(folder)):
        if not os.path.exists(os.path.join(target, name)):
            os.makedirs(target, exist_ok=True)
            partial = os.path.join(target, f".{name}.{os.getpid()}.partial")
            try:
                shutil.copyfile(os.path.join(folder, name), partial)
                os.replace(partial, os.path.join(target, name))
            finally:
                if os.path.exists(partial):
                    os.remove(partial)
            copied.append(name)
    return copied


def output_folder() -> str:
    """ComfyUI's output folder (outside ComfyUI: ./output)."""
    return folder_paths.get_output_directory() if IN_COMFYUI else os.path.abspath("output")
