"""Queue-time validation as ComfyUI 0.26 applies it (tests/nodes/comfy_rules.py): every problem that needs no file's
content (the mode's sizes and steps, a retake's span, windows, layouts, NaN numbers, nulls) is refused when queued,
in a message that begins with the input at fault; every limit INPUT_TYPES states is enforced, also on the inputs
VALIDATE_INPUTS names; what is known only at run time is checked first thing when the node runs; a file picked in the
wrong loader says where it belongs."""

from __future__ import annotations

import inspect
import os

import pytest
import torch

from nodes import NODE_CLASS_MAPPINGS as NODES

from .comfy_rules import at_fault, comfy_errors

# every widget value of each node with a validator, as the frontend queues them (links: None), and what is linked
GOOD = {
    "LTX2Generate": dict(prompt="a cat", negative_prompt="blurry", mode="one-stage", width=96, height=64, frames=9,
                         fps=24.0, seed=1, steps=2, distilled_lora="none"),
    "LTX2GenerateLong": dict(prompt="a cat", negative_prompt="blurry", mode="one-stage", width=96, height=64,
                             duration=2.0, fps=24.0, window=25, overlap=8, seed=1, steps=2, window_prompts="a\nb",
                             distilled_lora="none"),
    "LTX2EmptyLatent": dict(width=96, height=64, frames=9, fps=24.0),
    "LTX2Sampler": dict(seed=1, steps=2, schedule="ltx2", sigmas="", compile=False, cuda_graphs=False),
    "LTX2Guidance": dict(cfg=3.0, stg=1.0, rescale=0.7, modality=3.0, stg_blocks="auto", audio_cfg=7.0,
                         audio_stg=1.0, audio_rescale=0.7, audio_modality=3.0, audio_stg_blocks="28,29"),
    "LTX2TextEncode": dict(prompt="a cat", negative_prompt="blurry"),
    "LTX2ParallelConfig": dict(layout='{"cfg": 2, "sp": 1, "tp": 1}', guidance_passes=4, attach=""),
    "LTX2Retake": dict(fps=24.0, start=0.5, end=1.0, keep_video=False, keep_audio=True),
    "LTX2ImageCondition": dict(frame=0, strength=1.0, crf=33),
    "LTX2AudioCondition": dict(start=0.0, duration=0.0, strength=1.0, fps=24.0),
    "LTX2VideoGuide": dict(strength=1.0, attention_strength=0.5),
    "LTX2LoraLoader": dict(lora_name=None, strength=1.0),
}
LINKS = {"LTX2Generate": {"model": "LTX2_MODEL", "text_encoder": "LTX2_TEXT_ENCODER"},
         "LTX2GenerateLong": {"model": "LTX2_MODEL", "text_encoder": "LTX2_TEXT_ENCODER"},
         "LTX2Retake": {"images": "IMAGE", "audio": "AUDIO"}, "LTX2LoraLoader": {"model": "LTX2_MODEL",
                                                                                   "lora_name": "*"}}
NAN = float("nan")
BAD = [  # node, the input at fault, its value (or changes, links), a word of the message
    ("LTX2Generate", "frames", 16, "8k+1"),
    ("LTX2Generate", "frames", 1449, "maximum 1441"),
    ("LTX2Generate", "width", 16384, "maximum 8192"),
    ("LTX2Generate", "width", 2**31, "maximum 8192"),
    ("LTX2Generate", "mode", "bogus", "not a choice"),
    ("LTX2Generate", "mode", None, "null is no value"),
    ("LTX2Generate", "width", 100, "multiples of 32"),  # one-stage: the UI steps by 32, an API caller need not
    ("LTX2Generate", "width", ({"mode": "two-stage", "width": 96, "distilled_lora": None},
                               {"upsampler": "LTX2_UPSAMPLER", "distilled_lora": "*"}), "multiples of 64"),
    ("LTX2Generate", "steps", ({"mode": "distilled", "width": 128, "steps": 3}, {"upsampler": "LTX2_UPSAMPLER"}),
     "fixed 8-step"),
    ("LTX2Generate", "fps", NAN, "finite"),
    ("LTX2Generate", "prompt", " ", "prompt is empty"),
    ("LTX2Generate", "mode", ({"mode": "two-stage"}, {"retake": "LTX2_RETAKE"}), "runs one stage"),
    ("LTX2Generate", "images", ({"audio_only": True}, {"images": "LTX2_IMAGES"}), "no video to hold images"),
    ("LTX2Generate", "guides", ({}, {"retake": "LTX2_RETAKE", "guides": "LTX2_GUIDES"}), "control videos guide"),
    ("LTX2Generate", "upsampler", ({"mode": "distilled", "width": 128, "steps": 0}, {}), "x2 spatial latent"),
    ("LTX2Generate", "distilled_lora", ({"mode": "two-stage", "width": 128}, {"upsampler": "LTX2_UPSAMPLER"}),
     "needs the distilled LoRA"),
    ("LTX2Generate", "retake", ({}, {"retake": "IMAGE"}), "IMAGE"),
    ("LTX2GenerateLong", "overlap", ({"window": 33, "overlap": 32}, {}), "must be below the window"),
    ("LTX2GenerateLong", "window_prompts", "a\nb\nc\nd", "4 window prompts for 3 window(s)"),
    ("LTX2GenerateLong", "duration", NAN, "finite"),
    ("LTX2GenerateLong", "window", 30, "8k+1"),
    ("LTX2Sampler", "cuda_graphs", "yes", "auto, on, off"),  # a saved true / false (GOOD) is taken as on / off
    ("LTX2EmptyLatent", "frames", 16, "8k+1"),
    ("LTX2EmptyLatent", "height", 0, "minimum 32"),
    ("LTX2EmptyLatent", "width", 100, "multiples of 32"),
    ("LTX2EmptyLatent", "fps", NAN, "finite"),
    ("LTX2Sampler", "sigmas", "1.0, 0.5; 0.0", "comma-separated"),
    ("LTX2Sampler", "sigmas", "1.0, nan, 0.0", "finite"),
    ("LTX2Sampler", "sigmas", ", ".join(str(1 - i / 2000) for i in range(2001)), "at most 201"),
    ("LTX2Sampler", "steps", 201, "max of 200"),
    ("LTX2Guidance", "cfg", NAN, "finite"),
    ("LTX2Guidance", "audio_rescale", 2.0, "maximum 1.0"),
    ("LTX2TextEncode", "prompt", " ", "prompt is empty"),
    ("LTX2TextEncode", "prompt", "a cat \ud800", "lone surrogate"),
    ("LTX2ParallelConfig", "guidance_passes", 5, "max of 4"),
    ("LTX2ParallelConfig", "guidance_passes", 0, "min of 1"),
    ("LTX2ParallelConfig", "layout", '{"cfg": 1000000000, "sp": 1, "tp": 1}', "exceeds the 4 guidance passes"),
    ("LTX2ParallelConfig", "layout", ({"layout": '{"cfg": 4, "sp": 32, "tp": 1}', "attach": "box:29600"}, {}),
     "64 workers can attach"),
    ("LTX2ParallelConfig", "layout", '{"cfg": 4, "sp": 2, "tp": 1}', "4 CPU workers are the most without a GPU"),
    ("LTX2ParallelConfig", "layout", '{"cfg": 2.5}', "cfg 2.5 is not a whole number"),
    ("LTX2ParallelConfig", "layout", '{"cfg": 1e400}', "cfg inf is not a whole number"),
    ("LTX2ParallelConfig", "layout", '{"cfg": 2, "gpus": 2}', "'gpus' is no axis"),
    ("LTX2ParallelConfig", "layout", '[2, 1, 1]', "JSON object"),
    ("LTX2ParallelConfig", "attach", "no-port", "HOST:PORT"),
    ("LTX2Retake", "end", ({"start": 2.0, "end": 1.0}, {}), "is empty"),
    ("LTX2Retake", "keep_audio", ({"keep_video": True, "keep_audio": True}, {}), "keeps both"),
    ("LTX2Retake", "start", NAN, "finite"),
    ("LTX2Retake", "audio", ({}, {"audio": "IMAGE"}), "IMAGE"),
    ("LTX2ImageCondition", "strength", NAN, "finite"),
    ("LTX2AudioCondition", "start", NAN, "finite"),
    ("LTX2VideoGuide", "attention_strength", NAN, "finite"),
    ("LTX2LoraLoader", "strength", NAN, "finite"),
    ("LTX2LoraLoader", "lora_name", ({"lora_name": None}, {"lora_name": None}), "pick a file from models/loras"),
]


def _case(name: str, at_fault: str, value) -> tuple[dict, dict]:
    """The widget values and links of a BAD case: GOOD's with `value` at the input at fault, or its changes."""
    changes, links = value if isinstance(value, tuple) else ({at_fault: value}, {})
    joined = {**LINKS.get(name, {}), **links}
    return {**GOOD[name], **changes}, {k: v for k, v in joined.items() if v is not None}


@pytest.mark.parametrize("name, values", GOOD.items())
def test_good_values_pass(name, values):
    assert comfy_errors(NODES[name], values, LINKS.get(name)) == []


@pytest.mark.parametrize("name, fault, value, word", BAD, ids=[f"{n}-{i}-{str(v)[:12]}" for n, i, v, _ in BAD])
def test_a_problem_is_refused_when_queued_on_the_input_at_fault(name, fault, value, word, monkeypatch):
    """ComfyUI lists a validator's failure on each input it names, with one message that begins with the input at
    fault; its own checks name that input alone."""
    from nodes import parallel

    monkeypatch.setattr(parallel.torch.cuda, "is_available", lambda: False)  # this machine's bound: CPU workers
    monkeypatch.setenv("LTX2_WORKERS_KEY", "a shared secret")  # attach: torchrun's workers authenticate with it
    values, links = _case(name, fault, value)
    errors = comfy_errors(NODES[name], values, links)
    assert errors and at_fault(errors) == fault, errors
    assert word in errors[0][1], errors


def test_an_stg_blocks_syntax_error_is_found_when_queued():
    """The block lists and the scales share one validator: ComfyUI marks each, the message names the one at fault."""
    errors = comfy_errors(NODES["LTX2Guidance"], {**GOOD["LTX2Guidance"], "audio_stg_blocks": "28;29"})
    assert {name for name, _ in errors} == set(GOOD["LTX2Guidance"])
    assert all("audio_stg_blocks: 'auto' or comma-separated" in message for _, message in errors)


def _named_number_inputs():
    for name, cls in NODES.items():
        if not hasattr(cls, "VALIDATE_INPUTS"):
            continue
        types = cls.INPUT_TYPES()
        for input_name in inspect.getfullargspec(cls.VALIDATE_INPUTS).args[1:]:
            spec = {**types.get("required", {}), **types.get("optional", {})}.get(input_name)
            if spec and spec[0] in ("INT", "FLOAT"):
                yield name, input_name, spec[1]


@pytest.mark.parametrize("name, input_name, options", list(_named_number_inputs()))
def test_the_inputs_a_validator_names_keep_their_stated_limits(name, input_name, options):
    """ComfyUI skips its range checks for them: the pack's validator enforces the same min and max, and a FLOAT's
    finiteness (NaN passes ComfyUI's own range check)."""
    validate = NODES[name].VALIDATE_INPUTS
    bad = (options["max"] + 1, options["min"] - 1, 2**31) + ((NAN,) if isinstance(options["max"], float) else ())
    for value in bad:
        assert isinstance(validate(**{input_name: value}), str), value


def test_every_float_input_is_refused_as_nan_when_queued():
    """ComfyUI's float() conversion takes "nan" and a JSON NaN, and its min / max checks let NaN through."""
    floats = [(name, input_name) for name, cls in NODES.items()
              for input_name, spec in {**cls.INPUT_TYPES().get("required", {}),
                                       **cls.INPUT_TYPES().get("optional", {})}.items() if spec[0] == "FLOAT"]
    assert len(floats) >= 20
    for name, input_name in floats:
        validate = getattr(NODES[name], "VALIDATE_INPUTS", None)
        assert validate is not None and input_name in inspect.getfullargspec(validate).args, (name, input_name)
        assert f"{input_name}: nan is not a finite number" in validate(**{input_name: NAN}), (name, input_name)


def test_the_distilled_lora_input_refuses_an_ic_lora_when_queued(files, tmp_path):
    from support.model_files import write_lora

    ic = write_lora(tmp_path / "depth.safetensors", 3, metadata={"reference_downscale_factor": "1"})
    validate = NODES["LTX2GenerateLong"].VALIDATE_INPUTS
    assert validate(distilled_lora=files["distilled"]) is True
    message = validate(distilled_lora=str(ic))
    assert message.startswith("distilled_lora: depth.safetensors is an IC-LoRA"), message
    assert NODES["LTX2Generate"].VALIDATE_INPUTS(distilled_lora=str(ic)) == message
    assert "is a checkpoint file" in NODES["LTX2Generate"].VALIDATE_INPUTS(distilled_lora=files["checkpoint"])


def test_a_null_choice_is_refused_and_a_linked_one_waits(files):
    """A null file name reaches the validator as None, as a link does; input_types tells them apart."""
    validate = NODES["LTX2CheckpointLoader"].VALIDATE_INPUTS
    assert "ckpt_name: pick a file from models/checkpoints" in validate(input_types={}, ckpt_name=None)
    assert validate(input_types={"ckpt_name": "*"}, ckpt_name=None) is True
    assert validate(input_types={"parallel": "LTX2_PARALLEL"}, ckpt_name=files["checkpoint"]) is True
    assert "parallel: a 'IMAGE' output" in validate(input_types={"parallel": "IMAGE"}, ckpt_name=files["checkpoint"])


def test_the_generate_node_checks_the_run_time_facts_before_any_model_work(files):
    """No model is touched (None here) before the request is checked: sizes for the mode, the prompt, the image
    frames (known only at run time: a -1 last frame resolves to the clip's length), the LoRA."""
    import numpy as np

    from ltx2_core.conditioning.images import ImageCondition

    generate = NODES["LTX2Generate"]().generate
    common = dict(model=None, text_encoder=None, negative_prompt="", fps=24.0, seed=1, steps=2)
    picture = np.zeros((64, 96, 3), np.uint8)
    cases = [
        (dict(prompt="a cat", mode="two-stage", width=96, height=64, frames=9), "multiples of 64"),
        (dict(prompt="a cat", mode="one-stage", width=100, height=64, frames=9), "100x64"),
        (dict(prompt=" ", mode="one-stage", width=96, height=64, frames=9), "prompt is empty"),
        (dict(prompt="a cat", mode="one-stage", width=96, height=64, frames=9,
              images=(ImageCondition(picture, 9, 1.0, 0),)), "0..8"),
        (dict(prompt="a cat", mode="one-stage", width=96, height=64, frames=9, distilled_lora=files["checkpoint"],
              images=(ImageCondition(picture, 0, 1.0, 0),)), "is a checkpoint file"),
    ]
    for inputs, message in cases:
        with pytest.raises(ValueError, match=message):
            generate(**common, **inputs)


def test_the_sampler_checks_the_image_frames_first(loaded):
    import numpy as np

    from ltx2_core.conditioning.images import ImageCondition

    _, _, conditioning, _ = loaded
    (latent,) = NODES["LTX2EmptyLatent"]().make(96, 64, 9, 24.0)
    images = (ImageCondition(np.zeros((64, 96, 3), np.uint8), 12, 1.0, 0),)
    with pytest.raises(ValueError, match="0..8"):  # before the model (None) or the encoder is touched
        NODES["LTX2Sampler"]().sample(None, conditioning, latent, 0, 2, "ltx2", images=images)


@pytest.mark.parametrize("name, key, belongs", [
    ("LTX2CheckpointLoader", "gemma", ("text encoder", "models/text_encoders", "LTX-2 Text Encoder Loader")),
    ("LTX2CheckpointLoader", "upsampler", ("latent upsampler", "models/latent_upscale_models", "Upsampler Loader")),
    ("LTX2TextEncoderLoader", "checkpoint", ("checkpoint", "models/checkpoints", "LTX-2 Checkpoint Loader")),
    ("LTX2LoraLoader", "checkpoint", ("checkpoint", "models/checkpoints", "ckpt_name")),
    ("LTX2UpsamplerLoader", "style", ("LoRA", "models/loras", "LTX-2 LoRA Loader")),
])
def test_a_file_of_another_kind_says_what_it_is_and_where_it_belongs(files, name, key, belongs):
    validate = NODES[name].VALIDATE_INPUTS
    argument = next(name for name in inspect.getfullargspec(validate).args[1:] if name != "input_types")
    right = {"LTX2CheckpointLoader": "checkpoint", "LTX2TextEncoderLoader": "gemma", "LTX2LoraLoader": "style",
             "LTX2UpsamplerLoader": "upsampler"}[name]
    assert validate(**{argument: files[right]}) is True
    message = validate(**{argument: files[key]})
    assert message.startswith(f"{argument}: ") and all(part in message for part in belongs), message
    for python_advice in ("TransformerConfig", "pass an explicit", "from_metadata", os.path.dirname(files[key])):
        assert python_advice not in message, message


@pytest.mark.parametrize("value", [None, 5, ""])
def test_a_missing_or_non_text_file_name_gets_a_message_not_a_type_error(value):
    from nodes.loaders import LTX2CheckpointLoader

    if value is not None:
        assert "pick a file from models/checkpoints" in LTX2CheckpointLoader.VALIDATE_INPUTS(ckpt_name=value)
    with pytest.raises(ValueError, match="pick a file from models/checkpoints"):
        LTX2CheckpointLoader().load(value)
