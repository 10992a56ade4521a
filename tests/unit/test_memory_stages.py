"""Every byte the run holds on the device, at the released sizes: the models are built as fake tensors (no memory,
no kernels) and placed by the functions the command line and the loader nodes use (`stream_text_encoder`,
`place_models`), with `meta` standing in for the GPU; then each module the pipeline runs is called in its order,
and on entering its forward (after its visit began) the test adds up every model tensor on the device. With that
stage's activations that must stay within the planned peak, and the peak within the card.

On today's main the text projection, Gemma's embeddings and its two layer slots stayed on the device after encoding
(and the video encoder and upsampler from loading on), outside the plan: 2.3 with fp8 weights on a 16 GB card held
20.6 GB while sampling, before activations, against a planned peak of 14.6 GB; every case of this matrix overflowed."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from ltx2_core import TransformerConfig
from ltx2_core.memory.offload import place_models, projection_parts, stream_text_encoder
from ltx2_core.memory.sizes import (
    SideBytes,
    encode_activation_bytes,
    image_activation_bytes,
    upsample_activation_bytes,
)
from ltx2_core.memory.plan import (
    GB,
    HEADROOM,
    TILE_BYTES_512,
    plan_run,
    transformer_weight_bytes,
)
from ltx2_core.quant.policy import quantize_blocks
from ltx2_core.memory.streaming import move_module
from ltx2_core.model.text import gemma3 as gemma_lm
from ltx2_core.model.text.encoder import PromptEncoder
from ltx2_core.model.text.projection import TextProjection
from ltx2_core.model.text.tokenizer import PromptTokenizer
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.upsampler import LatentUpsampler, UpsamplerConfig
from ltx2_core.model.video_vae import VideoEncoder
from ltx2_core.model.video_vae.config import VideoVaeConfig
from ltx2_core.model.video_vae.decoder import VideoDecoder
from ltx2_core.pipeline import Models
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.decoders import Decoders
from support.configs import RELEASED_2_0, RELEASED_2_3, RELEASED_VAE_2_0, RELEASED_VAE_2_3, bf16_built

RELEASED = {"2.0": (RELEASED_2_0, "2.0.0", RELEASED_VAE_2_0), "2.3": (RELEASED_2_3, "2.3.0", RELEASED_VAE_2_3)}
DEVICE = torch.device("meta")  # the GPU's stand-in: its tensors hold no memory, as the fake host tensors
FRAMES, HEIGHT, WIDTH = 121, 512, 768  # one-stage; two-stage samples 768x512 first, then 1536x1024
UPSAMPLER = UpsamplerConfig(in_channels=128, mid_channels=1024, num_blocks_per_stage=4, spatial_scale=2.0,
                            rational_resampler=False)


class _Entered(Exception):
    """Raised by the recorder once a module's forward was entered: no kernel needs to run."""


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _module_bytes(*modules) -> int:
    return _bytes({id(t): t for m in modules for t in [*m.parameters(), *m.buffers()]}.values())


def _models(version: str, fp8: bool):
    """Every model of a two-stage run with an image, on the host as loaded (the decoders on the device)."""
    metadata, release, vae = RELEASED[version]
    config = TransformerConfig.from_metadata(metadata, release)
    transformer = bf16_built(LTX2Transformer, config)
    if fp8:
        quantize_blocks(transformer)
    with unset_fake_temporarily():  # built on meta by transformers, then given (fake) storage
        gemma = bf16_built(gemma_lm.build_on_meta, gemma_lm.text_config(gemma_lm.GEMMA3_12B_TEXT))
    gemma.to_empty(device="cpu")
    hidden, states = gemma_lm.GEMMA3_12B_TEXT["hidden_size"], gemma_lm.GEMMA3_12B_TEXT["num_hidden_layers"] + 1
    projection = bf16_built(TextProjection, TextConfig.from_metadata(metadata), hidden, states)
    tokenizer = PromptTokenizer(lambda text: [5], bos_id=2, pad_id=0, source="test")
    encoder = PromptEncoder(tokenizer, gemma, projection, device=DEVICE, offload_device="cpu")
    vae = VideoVaeConfig.from_metadata(vae)
    decoder = move_module(bf16_built(VideoDecoder, vae), DEVICE)  # the decoders load on the device and stay there
    models = Models(transformer, encoder, Decoders(decoder, decoder, decoder), bf16_built(LatentUpsampler, UPSAMPLER),
                    None, bf16_built(VideoEncoder, vae))
    return config, models


def _side(models: Models) -> SideBytes:
    """What the CLI reads from the files' headers, counted on the built modules."""
    gemma, layers = models.prompt_encoder.gemma, models.prompt_encoder.gemma.layers
    hidden, count = gemma_lm.GEMMA3_12B_TEXT["hidden_size"], gemma_lm.GEMMA3_12B_TEXT["num_hidden_layers"]
    side = SideBytes(
        gemma_rest=_module_bytes(gemma) - _module_bytes(layers), gemma_layer=_module_bytes(layers[0]),
        gemma_layers=_module_bytes(layers), projection=_module_bytes(models.prompt_encoder.projection),
        projection_part=max(_module_bytes(part) for part in projection_parts(models.prompt_encoder.projection)),
        video_encoder=_module_bytes(models.video_encoder),
        encode_activations=encode_activation_bytes(hidden, count, torch.bfloat16),
        image_activations=image_activation_bytes(1, *_full_size(models), torch.bfloat16))
    if models.upsampler is not None:
        side = side._replace(upsampler=_module_bytes(models.upsampler), upsample_activations=upsample_activation_bytes(
            FRAMES, *_full_size(models), UPSAMPLER.mid_channels, torch.bfloat16))
    return side


def _full_size(models: Models) -> tuple[int, int]:
    return (2 * HEIGHT, 2 * WIDTH) if models.upsampler is not None else (HEIGHT, WIDTH)


def _on_device(models: Models) -> int:
    """Every model tensor on the device now, and the streaming slots."""
    encoder = models.prompt_encoder
    modules = [models.transformer, encoder.gemma, encoder.projection, models.decoders.video, models.video_encoder]
    modules += [models.upsampler] if models.upsampler is not None else []
    tensors = {id(t): t for m in modules for t in [*m.parameters(), *m.buffers()] if t.device == DEVICE}
    slots = [t for m in modules if getattr(m, "block_streamer", None) for slot in m.block_streamer.slots for t in slot]
    return _bytes(tensors.values()) + _bytes(slots)


def _run_stages(models: Models) -> dict[str, list[int]]:
    """The modules in the pipeline's order (prompt, images, stage 1, upsampling, stage 2, decoding): the device bytes
    as each one's forward is entered."""
    encoder = models.prompt_encoder
    order = [("encoding the prompt", module) for module in (encoder.gemma, *projection_parts(encoder.projection))]
    order += [("encoding the images", models.video_encoder), ("sampling", models.transformer)]
    if models.upsampler is not None:
        order += [("upsampling", models.upsampler), ("encoding the images", models.video_encoder),
                  ("sampling", models.transformer)]
    order += [("decoding", models.decoders.video)]
    seen: dict[str, list[int]] = {}
    for stage, module in order:
        def record(_module, _args, stage=stage):
            seen.setdefault(stage, []).append(_on_device(models))
            raise _Entered

        handle = module.register_forward_pre_hook(record)
        with pytest.raises(_Entered):
            module()
        handle.remove()
    return seen


@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_every_module_on_the_device_in_every_stage_is_inside_the_planned_peak(version, fp8):
    """One- and two-stage with an image on 16, 24 and 32 GB cards (the models built once, re-placed per plan)."""
    with FakeTensorMode(allow_non_fake_inputs=True):
        config, loaded = _models(version, fp8)
        stream_text_encoder(loaded.prompt_encoder, DEVICE)
        for two_stage, gb in itertools.product((False, True), (16, 24, 32)):
            models = loaded._replace(upsampler=loaded.upsampler if two_stage else None)
            side = _side(models)
            plan = plan_run(config, transformer_weight_bytes(config, fp8=fp8), gb * 10**9, FRAMES,
                            *_full_size(models), 4, two_stage, fp8_available=not fp8,
                            decoders=_module_bytes(models.decoders.video), tile_bytes_512=TILE_BYTES_512, side=side)
            streamer = place_models(models, plan, DEVICE)
            seen = _run_stages(models)
            _unplace(models.transformer, streamer)
            assert plan.peak <= HEADROOM * gb * GB
            activations = {"sampling": plan.stages()["sampling"], "decoding": plan.stages()["decoding"],
                           "encoding the prompt": side.encode_activations,
                           "encoding the images": side.image_activations, "upsampling": side.upsample_activations}
            for stage, held in seen.items():
                assert max(held) + activations[stage] <= plan.peak, (two_stage, gb, stage, max(held) / GB)
            # sampling holds the transformer as planned and the decoders, nothing else
            assert max(seen["sampling"]) == plan.device_weights + plan.decoders


def _unplace(transformer, streamer) -> None:
    """Back on the host as loaded, for the next plan."""
    if streamer is not None:
        streamer.remove()
        del transformer.block_streamer
    move_module(transformer, "cpu")
