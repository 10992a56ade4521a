"""The example workflows refer only to existing nodes and inputs, with values those inputs accept and links to
existing outputs (checked without ComfyUI; the end-to-end tests run them in a real one)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import pytest

from nodes import NODE_CLASS_MAPPINGS as NODES

ROOT = Path(__file__).resolve().parents[2]
API_WORKFLOWS = sorted((ROOT / "example_workflows" / "api").glob("*.api.json"))
# the core ComfyUI nodes the examples use, and their inputs (ComfyUI 0.26's LoadImage, LoadAudio, LoadVideo,
# GetVideoComponents, CreateVideo and SaveVideo; the frontend queues LoadVideo with its empty "video-preview")
CORE = {"LoadImage": ({"image"}, set(), 2), "LoadAudio": ({"audio"}, set(), 1),
        "LoadVideo": ({"file"}, {"video-preview"}, 1), "GetVideoComponents": ({"video"}, set(), 4),
        "CreateVideo": ({"images", "fps"}, {"audio", "bit_depth"}, 1),
        "SaveVideo": ({"video", "filename_prefix", "format", "codec"}, set(), 0),
        "SaveAudioAdvanced": ({"audio", "filename_prefix", "format"}, set(), 1)}
# and those of ComfyUI's own LTX-2.3 template, which ltx23_native_template_fast keeps (ComfyUI 0.26's inputs; a
# dynamic combo's sub-input, ResizeImageMaskNode's resize_type.longer_size, as an optional one)
CORE |= {"CheckpointLoaderSimple": ({"ckpt_name"}, set(), 3), "LTXVAudioVAELoader": ({"ckpt_name"}, set(), 1),
         "LTXAVTextEncoderLoader": ({"text_encoder", "ckpt_name", "device"}, set(), 1),
         "CLIPTextEncode": ({"text", "clip"}, set(), 1),
         "LTXVConditioning": ({"positive", "negative", "frame_rate"}, set(), 2),
         "LoraLoaderModelOnly": ({"model", "lora_name", "strength_model"}, set(), 1),
         "LatentUpscaleModelLoader": ({"model_name"}, set(), 1),
         "LTXVLatentUpsampler": ({"samples", "upscale_model", "vae"}, set(), 1),
         "EmptyLTXVLatentVideo": ({"width", "height", "length", "batch_size"}, set(), 1),
         "LTXVEmptyLatentAudio": ({"frames_number", "frame_rate", "batch_size", "audio_vae"}, set(), 1),
         "LTXVConcatAVLatent": ({"video_latent", "audio_latent"}, set(), 1),
         "LTXVSeparateAVLatent": ({"av_latent"}, set(), 2),
         "LTXVImgToVideoInplace": ({"vae", "image", "latent", "strength", "bypass"}, set(), 1),
         "LTXVPreprocess": ({"image", "img_compression"}, set(), 1),
         "ResizeImageMaskNode": ({"input", "resize_type", "scale_method"}, {"resize_type.longer_size"}, 1),
         "CFGGuider": ({"model", "positive", "negative", "cfg"}, set(), 1),
         "KSamplerSelect": ({"sampler_name"}, set(), 1),
         "RandomNoise": ({"noise_seed"}, set(), 1), "ManualSigmas": ({"sigmas"}, set(), 1),
         "VAEDecodeTiled": ({"samples", "vae", "tile_size", "overlap", "temporal_size", "temporal_overlap"}, set(), 1),
         "LTXVAudioVAEDecode": ({"samples", "audio_vae"}, set(), 1), "ComfyNumberConvert": ({"value"}, set(), 2),
         "PrimitiveBoolean": ({"value"}, set(), 1), "PrimitiveInt": ({"value"}, set(), 1),
         "PrimitiveFloat": ({"value"}, set(), 1)}
FOLDER_COMBOS = {"ckpt_name", "transformer", "video_vae", "audio_vae", "text_encoder", "lora_name", "upscale_model_name",
                 "distilled_lora", "text_projection", "image", "audio", "file", "ic_lora", "detailing_lora"}


def _inputs(class_type: str) -> tuple[dict, dict, int]:
    if class_type in CORE:
        required, optional, outputs = CORE[class_type]
        return dict.fromkeys(required), dict.fromkeys(optional), outputs
    spec = NODES[class_type].INPUT_TYPES()
    return spec["required"], spec.get("optional", {}), len(NODES[class_type].RETURN_TYPES)


def _widget(spec: tuple) -> bool:
    """Whether an input is a widget (a value in the node) rather than a link."""
    kind, options = spec[0], spec[1] if len(spec) > 1 else {}
    return (isinstance(kind, list) or kind in ("INT", "FLOAT", "STRING", "BOOLEAN")) and not options.get("forceInput")


def _value_problem(name: str, spec: tuple | None, value: object) -> str | None:
    if spec is None or name in FOLDER_COMBOS:
        return None  # a core input, or a combo of the user's model files
    kind, options = spec[0], spec[1] if len(spec) > 1 else {}
    if isinstance(kind, list):
        return None if value in kind else f"{value!r} not in {kind}"
    if kind in ("INT", "FLOAT"):
        ok = isinstance(value, (int, float)) and options.get("min", value) <= value <= options.get("max", value)
        return None if ok else f"{value!r} outside [{options.get('min')}, {options.get('max')}]"
    expected = {"STRING": str, "BOOLEAN": bool}.get(kind)
    return None if expected is None or isinstance(value, expected) else f"{value!r} is not a {kind}"


def _output_type(workflow: dict, link: list) -> str:
    source = workflow[link[0]]["class_type"]
    return NODES[source].RETURN_TYPES[link[1]] if source in NODES else "*"


@pytest.mark.parametrize("path", API_WORKFLOWS, ids=[p.name for p in API_WORKFLOWS])
def test_api_workflow_uses_existing_nodes_inputs_and_values(path):
    workflow = json.loads(path.read_text())
    problems = []
    for node_id, entry in workflow.items():
        class_type, given = entry["class_type"], entry["inputs"]
        if class_type not in NODES and class_type not in CORE:
            problems.append(f"{node_id}: unknown node {class_type}")
            continue
        required, optional, _ = _inputs(class_type)
        problems += [f"{node_id}.{name}: missing" for name in required if name not in given]
        # an optional widget too: the frontend queues every widget, so the API twin names its value
        problems += [f"{node_id}.{name}: optional widget missing" for name, spec in optional.items()
                     if class_type in NODES and name not in given and _widget(spec)]
        for name, value in given.items():
            if name not in required and name not in optional:
                problems.append(f"{node_id}.{name}: no such input of {class_type}")
            elif isinstance(value, list):
                source = workflow.get(value[0])
                if source is None or not 0 <= value[1] < _inputs(source["class_type"])[2]:
                    problems.append(f"{node_id}.{name}: links to a missing output {value}")
            elif problem := _value_problem(name, {**required, **optional}[name], value):
                problems.append(f"{node_id}.{name}: {problem}")
        validate = getattr(NODES.get(class_type), "VALIDATE_INPUTS", None)
        if validate is not None:
            names = validate.__code__.co_varnames[1:validate.__code__.co_argcount]
            values = {n: given[n] for n in names
                      if n in given and n not in FOLDER_COMBOS and not isinstance(given[n], list)}
            if "input_types" in names:  # as ComfyUI gives them: each linked input's output type (core nodes': *);
                # a user's model file (absent here) as if linked: its check waits
                values["input_types"] = {n: "*" if n in FOLDER_COMBOS else _output_type(workflow, link)
                                         for n, link in given.items() if isinstance(link, list) or n in FOLDER_COMBOS}
                values |= {n: None for n in values["input_types"] if n in names}
            result = validate(**values)
            if result is not True:
                problems.append(f"{node_id}: {result}")
    assert problems == []


def test_every_pipeline_has_an_example():
    names = {p.name for p in API_WORKFLOWS}
    assert {"ltx2_t2v_one_stage.api.json", "ltx2_t2v_two_stage.api.json", "ltx2_t2v_distilled.api.json"} <= names
    used = {entry["class_type"] for p in API_WORKFLOWS for entry in json.loads(p.read_text()).values()}
    assert set(NODES) <= used  # every node appears in an example


def test_the_pictures_the_examples_load_ship_with_the_pack_and_reach_comfyuis_input_folder(tmp_path, monkeypatch):
    """A dragged-in example finds its pictures and sounds: the pack ships them and copies them into ComfyUI's input
    folder (where LoadImage and LoadAudio look) unless a file of that name is there already."""
    from types import SimpleNamespace

    from PIL import Image

    from ltx2_core.audio_io import read_audio
    from nodes import EXAMPLE_INPUTS, bridge

    named = {node["inputs"]["image"] for path in API_WORKFLOWS for node in json.loads(path.read_text()).values()
             if node["class_type"] == "LoadImage"}
    assert named == {"ltx2_example_first.png", "ltx2_example_last.png", "ltx2_example_portrait.png"}
    for name in named:
        with Image.open(Path(EXAMPLE_INPUTS) / name) as picture:
            assert picture.format == "PNG" and picture.size == (384, 256)
    sounds = {node["inputs"]["audio"] for path in API_WORKFLOWS for node in json.loads(path.read_text()).values()
              if node["class_type"] == "LoadAudio"}
    assert sounds == {"ltx2_example_voice.wav", "ltx2_example_song.flac"}
    for name in sounds:  # small, a few seconds each: long enough for 121 frames at 24 fps
        sound = read_audio(Path(EXAMPLE_INPUTS) / name)
        assert (Path(EXAMPLE_INPUTS) / name).stat().st_size < 300_000 and 121 / 24 < sound.seconds < 6
    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "folder_paths", SimpleNamespace(get_input_directory=lambda: str(tmp_path / "input")))
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "ltx2_example_last.png").write_bytes(b"the user's own")
    assert sorted(bridge.provide_inputs(EXAMPLE_INPUTS)) == [
        "ltx2_example_depth.mp4", "ltx2_example_first.png", "ltx2_example_portrait.png", "ltx2_example_retake.mp4",
        "ltx2_example_song.flac", "ltx2_example_voice.wav"]
    assert (tmp_path / "input" / "ltx2_example_last.png").read_bytes() == b"the user's own"  # never overwritten
    assert bridge.provide_inputs(EXAMPLE_INPUTS) == []


def test_the_shipped_sounds_are_what_the_script_synthesises():
    """tools/make_example_inputs.py makes the voice and the song (16-bit, lossless): they decode to its samples."""
    import importlib.util

    from ltx2_core.audio_io import read_audio
    from nodes import EXAMPLE_INPUTS

    spec = importlib.util.spec_from_file_location("make_example_inputs", ROOT / "tools" / "make_example_inputs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name, samples, rate in (("ltx2_example_voice.wav", script.voice(), 16000),
                                ("ltx2_example_song.flac", script.song(), 32000)):
        shipped = read_audio(Path(EXAMPLE_INPUTS) / name)
        want = np.round(np.clip(samples, -1, 1) * 32767) / 32768
        assert shipped.rate == rate and np.array_equal(shipped.samples.numpy(), want.astype(np.float32)), name


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_example_inputs", ROOT / "tools" / "make_example_inputs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_shipped_videos_are_what_the_script_draws_and_clips_the_examples_can_use():
    """The depth control (121 frames, silent) and the retake's clip (49 frames with the voice) ship small, decode
    (H.264, lossy: within 3 of 255 on average) to the script's frames, and are clips a retake or control takes."""
    from ltx2_core.audio_io import read_audio
    from ltx2_core.video_io import check_video_file, read_video
    from nodes import EXAMPLE_INPUTS

    script = _script()
    named = {node["inputs"]["file"] for path in API_WORKFLOWS for node in json.loads(path.read_text()).values()
             if node["class_type"] == "LoadVideo"}
    assert named == {"ltx2_example_depth.mp4", "ltx2_example_retake.mp4"}
    for name, frames, has_sound in (("ltx2_example_depth.mp4", script.depth_frames(), False),
                                    ("ltx2_example_retake.mp4", script.retake_frames(), True)):
        path = Path(EXAMPLE_INPUTS) / name
        assert path.stat().st_size < 100_000
        info = check_video_file(path)
        assert (info.frames, info.height, info.width, info.fps, info.has_sound) == (*frames.shape[:3], 24.0, has_sound)
        decoded = (read_video(path)[0].permute(1, 2, 3, 0) + 1) * 127.5
        assert float((decoded - torch.from_numpy(frames).float()).abs().mean()) < 3, name
    sound = read_audio(Path(EXAMPLE_INPUTS) / "ltx2_example_retake.mp4")
    assert sound.seconds >= 49 / 24


def test_the_tiny_ic_lora_fits_the_demo_model_and_states_its_downscale():
    """The control example's test LoRA (example_workflows/loras, linked into ComfyUI's models/loras by the end-to-end
    tests): every pair fits the tiny LTX-2.3 transformer; reference_downscale_factor 2; the script's exact tensors."""
    from ltx2_core import TransformerConfig, load_lora
    from ltx2_core.demo import demo_transformer
    from ltx2_core.loader.lora import check_lora, lora_reference_scale

    path = ROOT / "example_workflows" / "loras" / _script().IC_LORA
    assert path.stat().st_size < 100_000 and lora_reference_scale(path) == 2
    lora = load_lora(path)
    assert len(check_lora(demo_transformer(TransformerConfig.tiny("2.3")), lora)) == len(lora.pairs) > 0
