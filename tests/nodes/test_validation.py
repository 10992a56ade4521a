"""Queue-time validation as ComfyUI 0.26 applies it (tests/nodes/comfy_rules.py): a problem is reported once, on
the input at fault; every limit INPUT_TYPES states is enforced, also on the inputs VALIDATE_INPUTS names; what is
known only at run time is checked first thing when the node runs; a file picked in the wrong loader says where it
belongs."""

from __future__ import annotations

import inspect
import os

import pytest
import torch

from nodes import NODE_CLASS_MAPPINGS as NODES

from .comfy_rules import comfy_errors

# every widget value of each node with a validator, as the frontend queues them (links: None)
GOOD = {
    "LTX2Generate": dict(prompt="a cat", negative_prompt="blurry", mode="one-stage", width=96, height=64, frames=9,
                         fps=24.0, seed=1, steps=2, distilled_lora=None),
    "LTX2EmptyLatent": dict(width=96, height=64, frames=9, fps=24.0),
    "LTX2Sampler": dict(seed=1, steps=2, schedule="ltx2", sigmas="", compile=False, cuda_graphs=False),
    "LTX2Guidance": dict(cfg=3.0, stg=1.0, rescale=0.7, modality=3.0, stg_blocks="auto", audio_cfg=7.0,
                         audio_stg=1.0, audio_rescale=0.7, audio_modality=3.0, audio_stg_blocks="28,29"),
    "LTX2TextEncode": dict(prompt="a cat", negative_prompt="blurry"),
    "LTX2ParallelConfig": dict(layout='{"cfg": 2, "sp": 1, "tp": 1}', guidance_passes=4, attach=""),
}
BAD = [  # node, the input at fault, its value, a word of the message
    ("LTX2Generate", "frames", 16, "8k+1"),
    ("LTX2Generate", "frames", 1449, "maximum 1441"),
    ("LTX2Generate", "width", 16384, "max of 8192"),
    ("LTX2Generate", "width", 2**31, "max of 8192"),
    ("LTX2Generate", "mode", "bogus", "not in list"),
    ("LTX2EmptyLatent", "frames", 16, "8k+1"),
    ("LTX2EmptyLatent", "height", 0, "min of 32"),
    ("LTX2Sampler", "sigmas", "1.0, 0.5; 0.0", "comma-separated"),
    ("LTX2Sampler", "sigmas", "1.0, nan, 0.0", "finite"),
    ("LTX2Sampler", "sigmas", ", ".join(str(1 - i / 2000) for i in range(2001)), "at most 201"),
    ("LTX2Sampler", "steps", 201, "max of 200"),
    ("LTX2TextEncode", "prompt", " ", "prompt is empty"),
    ("LTX2TextEncode", "prompt", "a cat \ud800", "lone surrogate"),
    ("LTX2ParallelConfig", "guidance_passes", 5, "max of 4"),
    ("LTX2ParallelConfig", "guidance_passes", 0, "min of 1"),
    ("LTX2ParallelConfig", "layout", '{"cfg": 1000000000, "sp": 1, "tp": 1}', "exceeds the 4 guidance passes"),
    ("LTX2ParallelConfig", "layout", '{"cfg": 4, "sp": 32, "tp": 1}', "64 workers can attach"),
]


@pytest.mark.parametrize("name, values", GOOD.items())
def test_good_values_pass(name, values):
    assert comfy_errors(NODES[name], values) == []


@pytest.mark.parametrize("name, at_fault, value, word", BAD, ids=[f"{n}-{i}" for n, i, *_ in BAD])
def test_a_problem_is_reported_once_on_the_input_at_fault(name, at_fault, value, word):
    errors = comfy_errors(NODES[name], {**GOOD[name], at_fault: value})
    assert [input_name for input_name, _ in errors] == [at_fault], errors
    assert word in errors[0][1]


def test_an_stg_blocks_syntax_error_is_found_when_queued():
    """The two block lists share one validator: ComfyUI marks both, the message names the one at fault."""
    errors = comfy_errors(NODES["LTX2Guidance"], {**GOOD["LTX2Guidance"], "audio_stg_blocks": "28;29"})
    assert {name for name, _ in errors} == {"stg_blocks", "audio_stg_blocks"}
    assert all("audio_stg_blocks: 'auto' or comma-separated" in message for _, message in errors)


def _named_number_inputs():
    for name, cls in NODES.items():
        if not hasattr(cls, "VALIDATE_INPUTS"):
            continue
        types = cls.INPUT_TYPES()
        for input_name in inspect.getfullargspec(cls.VALIDATE_INPUTS).args[1:]:
            spec = {**types.get("required", {}), **types.get("optional", {})}[input_name]
            if spec[0] in ("INT", "FLOAT"):
                yield name, input_name, spec[1]


@pytest.mark.parametrize("name, input_name, options", list(_named_number_inputs()))
def test_the_inputs_a_validator_names_keep_their_stated_limits(name, input_name, options):
    """ComfyUI skips its range checks for them: the pack's validator enforces the same min and max."""
    validate = NODES[name].VALIDATE_INPUTS
    for value in (options["max"] + 1, options["min"] - 1, 2**31):
        assert isinstance(validate(**{input_name: value}), str), value


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
    argument = inspect.getfullargspec(validate).args[1]
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
