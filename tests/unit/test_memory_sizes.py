"""The command line's plan reads the modules beside the transformer from the files' headers: those bytes equal what
the loaded modules hold, and the plan of a run with files counts them (the image and the upsampler only when the
run has them)."""

from __future__ import annotations

import torch

from ltx2_core.__main__ import build_request, check_early, memory_plan, parse_args
from ltx2_core.loader import load_upsampler, load_video_encoder
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.memory.offload import projection_parts
from ltx2_core.memory.sizes import checkpoint_side_bytes, gemma_bytes, projection_part_bytes, upsampler_bytes
from ltx2_core.model_files import ModelFiles
from support.model_files import write_lora, write_upsampler


def _bytes(*modules) -> int:
    return sum(t.numel() * t.element_size() for m in modules for t in [*m.parameters(), *m.buffers()])


def test_header_bytes_equal_the_loaded_modules(gemma_files, tiny_checkpoints, tmp_path):
    checkpoint = tiny_checkpoints["2.3"]
    encoder = load_prompt_encoder(gemma_files[0], checkpoint, max_length=32, dtype=torch.bfloat16)
    rest, layer, layers = gemma_bytes(gemma_files[0], torch.bfloat16)
    gemma = encoder.gemma
    parameters = sum(p.numel() * p.element_size() for p in gemma.parameters())
    assert layers == sum(p.numel() * p.element_size() for p in gemma.layers.parameters()) == len(gemma.layers) * layer
    assert rest == parameters - layers
    projection, video_encoder = checkpoint_side_bytes(checkpoint, torch.bfloat16)
    assert projection == sum(p.numel() * p.element_size() for p in encoder.projection.parameters())
    parts = [sum(p.numel() * p.element_size() for p in part.parameters())
             for part in projection_parts(encoder.projection)]
    assert projection_part_bytes(checkpoint, torch.bfloat16) == max(parts) < projection
    loaded = _bytes(load_video_encoder(checkpoint, dtype=torch.bfloat16))
    assert loaded <= video_encoder <= loaded + 1024  # the header also counts statistics the encoder does not read
    path = write_upsampler(tmp_path / "up.safetensors")
    # within a few hundred bytes: buffers built at load (the blur kernel) are not in the file
    assert abs(upsampler_bytes(path, torch.bfloat16) - _bytes(load_upsampler(path, dtype=torch.bfloat16))) <= 1024


def test_the_command_lines_plan_counts_the_text_side_the_image_and_the_upsampler(gemma_files, tiny_checkpoints,
                                                                                 tmp_path):
    from PIL import Image

    Image.new("RGB", (64, 64)).save(tmp_path / "cat.png")
    common = ["--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]), "--device", "cpu",
              "--memory-budget", "100", "--width", "128", "--height", "128", "--frames", "9"]
    two_stage = ["--mode", "two-stage", "--upsampler", str(write_upsampler(tmp_path / "up.safetensors")),
                 "--distilled-lora", str(write_lora(tmp_path / "distilled.safetensors", 1))]
    plans = {}
    for name, flags in (("text only", []), ("image, two-stage", ["--image", str(tmp_path / "cat.png"), *two_stage])):
        args = parse_args([*common, *flags])
        files = ModelFiles(args.checkpoint, args.text_encoder, args.upsampler, args.distilled_lora, version="2.0")
        plans[name] = memory_plan(args, check_early(args, build_request(args), files), files)
    text, full = plans["text only"].side, plans["image, two-stage"].side
    assert text.gemma_layers and text.projection and not text.video_encoder and not text.upsampler
    assert full.video_encoder and full.upsampler and full.image_activations and full.upsample_activations
    assert "visiting: encoding the prompt" in plans["image, two-stage"].describe()


def test_the_loader_nodes_plan_for_gemma_3_12b_and_one_image(tiny_checkpoints):
    """The checkpoint loader plans before the text encoder is chosen: Gemma 3 12B's sizes, the file's projection and
    video encoder."""
    from ltx2_core.memory.sizes import gemma_12b_bytes, text_and_image_bytes

    side = text_and_image_bytes(tiny_checkpoints["2.3"], None, 121, 512, 768)
    projection, encoder = checkpoint_side_bytes(tiny_checkpoints["2.3"], torch.bfloat16)
    assert (side.gemma_rest, side.gemma_layer, side.gemma_layers) == gemma_12b_bytes(torch.bfloat16)
    assert (side.projection, side.video_encoder) == (projection, encoder) and side.image_activations > 0
    assert side.upsampler == 0
