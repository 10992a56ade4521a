"""Gemma 3's vision tower for image-to-video prompt enhancement (`model.text.enhance`): transformers' SigLIP vision
model and `Gemma3MultiModalProjector`, loaded from the text encoder's own file or folder only when an image is
enhanced (encoding never needs them), and the image's preparation as ltx-pipelines 1.2.0 does it.

The reference (`generate_enhanced_prompt` with an image): the image as uint8 RGB, resized keeping its aspect so its
long side is 896 (`resize_aspect_ratio_preserving`: bilinear on the uint8 tensor, centre crop), then Gemma 3's
processor: its image processor (PIL backend: resize to 896², rescale, normalise with mean = std = 0.5) and the
image placeholder of the chat text expanded to "\\n\\n<start_of_image>" + 256 image tokens + "<end_of_image>\\n\\n";
the model replaces the image tokens' embeddings by the projected vision features.

Settings: a Hugging Face folder's config.json (`vision_config`, `mm_tokens_per_image`, `image_token_index`) and
preprocessor_config.json; a single file (ComfyUI's, no config) takes google/gemma-3-12b-it's released values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ltx2_core.model.text.chat import GEMMA3_IMAGE_TOKEN_ID

# google/gemma-3-12b-it's vision settings (SigLIP so400m at 896², 256 tokens per image)
GEMMA3_12B_VISION = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                     "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
                     "layer_norm_eps": 1e-6, "vision_use_head": False}
GEMMA3_12B_PREPROCESSOR = {"image_processor_type": "Gemma3ImageProcessor", "do_resize": True,
                           "size": {"height": 896, "width": 896}, "resample": 2, "do_rescale": True,
                           "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5, 0.5, 0.5],
                           "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": None, "do_pan_and_scan": None}
GEMMA3_IMAGE_TOKENS = 256
IMAGE_LONG_SIDE = 896  # the reference's resize before the processor
BOI, EOI, IMAGE_TOKEN = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
# where each layout keeps the tower and the projector (HF folders: transformers 4.x and 5.x names; ComfyUI's file)
TOWER_PREFIXES = ("model.vision_tower.vision_model.", "vision_tower.vision_model.", "model.vision_tower.",
                  "vision_tower.", "vision_model.")
PROJECTOR_PREFIXES = ("multi_modal_projector.", "model.multi_modal_projector.")


@dataclass(frozen=True)
class VisionSettings:
    vision: Mapping[str, Any] = field(default_factory=lambda: dict(GEMMA3_12B_VISION))
    preprocessor: Mapping[str, Any] = field(default_factory=lambda: dict(GEMMA3_12B_PREPROCESSOR))
    tokens: int = GEMMA3_IMAGE_TOKENS  # image tokens per image
    image_token_id: int = GEMMA3_IMAGE_TOKEN_ID

    @classmethod
    def of(cls, source) -> VisionSettings:
        """The settings of a `GemmaSource`: its folder's files, else the released ones."""
        if source.layout != "huggingface":
            return cls()
        raw = json.loads((source.path / "config.json").read_text())
        processor = source.path / "preprocessor_config.json"
        return cls({**GEMMA3_12B_VISION, **(raw.get("vision_config") or {})},
                   json.loads(processor.read_text()) if processor.is_file() else dict(GEMMA3_12B_PREPROCESSOR),
                   int(raw.get("mm_tokens_per_image", GEMMA3_IMAGE_TOKENS)),
                   int(raw.get("image_token_index", raw.get("image_token_id", GEMMA3_IMAGE_TOKEN_ID))))

    def image_sequence(self) -> str:
        """What the processor puts in place of the chat's image placeholder."""
        return f"\n\n{BOI}{IMAGE_TOKEN * self.tokens}{EOI}\n\n"


class VisionTower(nn.Module):
    """pixel values (1, 3, S, S) -> image features (1, tokens, text hidden size)."""

    def __init__(self, settings: VisionSettings, text_hidden: int) -> None:
        super().__init__()
        from transformers import Gemma3Config, SiglipVisionConfig, SiglipVisionModel
        from transformers.models.gemma3.modeling_gemma3 import Gemma3MultiModalProjector

        vision = SiglipVisionConfig(**{k: v for k, v in settings.vision.items() if k != "model_type"})
        config = Gemma3Config(vision_config=vision.to_dict(), text_config={"hidden_size": text_hidden},
                              mm_tokens_per_image=settings.tokens)
        with torch.device("meta"):
            self.tower = SiglipVisionModel(vision)
            self.projector = Gemma3MultiModalProjector(config)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.projector(self.tower(pixel_values=pixel_values).last_hidden_state)


def resized_image(image: np.ndarray | torch.Tensor, long_side: int = IMAGE_LONG_SIDE) -> torch.Tensor:
    """An RGB uint8 image (H, W, 3) with its long side at `long_side` (aspect kept; bilinear on uint8, centre crop),
    as the reference's `resize_aspect_ratio_preserving` gives it."""
    image = torch.as_tensor(np.asarray(image))
    height, width = image.shape[0], image.shape[1]
    scale = long_side / float(max(height, width))
    target_h, target_w = int(height * scale), int(width * scale)
    pixels = image.permute(2, 0, 1).unsqueeze(0)
    fill = max(target_h / height, target_w / width)
    new_h, new_w = math.ceil(height * fill), math.ceil(width * fill)
    pixels = torch.nn.functional.interpolate(pixels, size=(new_h, new_w), mode="bilinear", align_corners=False)
    top, left = (new_h - target_h) // 2, (new_w - target_w) // 2
    pixels = pixels[:, :, top:top + target_h, left:left + target_w]
    return pixels[0].permute(1, 2, 0).to(torch.uint8)


def pixel_values(image: torch.Tensor, settings: VisionSettings) -> torch.Tensor:
    """The image processor's pixel values (1, 3, S, S) float32 for a uint8 (H, W, 3) image: transformers' Gemma 3
    image processor (its PIL backend when this transformers has one, as the reference picks it)."""
    import transformers

    name = settings.preprocessor.get("image_processor_type", "Gemma3ImageProcessor")
    cls = getattr(transformers, f"{name}Pil", None) or getattr(transformers, name)
    processor = cls.from_dict(dict(settings.preprocessor))
    return processor(images=image, return_tensors="pt")["pixel_values"]
