"""The reference side of tests/parity/test_enhance_parity.py: ltx-pipelines 1.2.0's `generate_enhanced_prompt` on
the loaded Gemma (`LTXGemmaTextEncoder._enhance`: chat template, processor, left padding to 8, seeded
`model.generate`), fp32, with `max_new_tokens` patched small for CPU time.

* Gemma 3: the tiny chat folder of `support.gemma_chat` as 1.2.0 reads a Gemma root (`GemmaAssets`, its tokenizer and
  processor builders), the model `AutoModelForImageTextToText.from_config` (lm_head tied) with the folder's
  language-model tensors;
* Gemma 4: the tiny `gemma4_unified` file of `support.gemma4`, built as ref120/gemma4.py builds it, with the model type
  the encoder reads patched to "gemma4" (1.2.0 refuses to enhance with the unified model: this runs its gemma4
  decoding and prompts on it, as the pack does).
`model.generate` is wrapped to record the ids it returns; the new ids and the cleaned text come back per seed.
"""

from pathlib import Path

import torch
from exchange import inputs, outputs
from ltx_core.text_encoders.gemma.encoders import base_encoder
from ltx_core.text_encoders.gemma.encoders.base_encoder import LTXGemmaTextEncoder, build_gemma_tokenizer
from ltx_core.text_encoders.gemma.gemma_assets import GemmaAssets, build_gemma_hf_config, build_gemma_processor
from ltx_pipelines.utils.helpers import generate_enhanced_prompt
from safetensors.torch import load_file
from transformers import AutoModelForImageTextToText

_, settings = inputs()
max_new = settings["max_new_tokens"]
base_encoder.GEMMA3_ENHANCE_GENERATION_KWARGS["max_new_tokens"] = max_new
base_encoder.GEMMA4_ENHANCE_GENERATION_KWARGS["max_new_tokens"] = max_new
if settings.get("system_prompt") is not None:  # the prompt our side reads (1.0.0's file or the user's)
    for name in ("gemma3_t2v", "gemma3_i2v", "gemma4_t2v", "gemma4_i2v"):
        setattr(base_encoder, f"default_{name}_system_prompt", lambda: settings["system_prompt"])

path = Path(settings["gemma"])
assets = GemmaAssets.load(path)
model = AutoModelForImageTextToText.from_config(build_gemma_hf_config(assets)).eval()
if settings["family"] == "gemma3":
    state = {}
    for shard in sorted(path.glob("*.safetensors")):
        state |= load_file(str(shard))
    language = {k.removeprefix("language_model.model."): v for k, v in state.items()
                if k.startswith("language_model.model.")}
    model.model.language_model.load_state_dict(language, strict=True)
    nested = any(k.startswith("vision_model.") for k in model.model.vision_tower.state_dict())
    vision = {("vision_model." if nested else "") + k.removeprefix("vision_tower.vision_model."): v
              for k, v in state.items() if k.startswith("vision_tower.vision_model.")}
    projector = {k.removeprefix("multi_modal_projector."): v for k, v in state.items()
                 if k.startswith("multi_modal_projector.")}
    if settings.get("image"):  # the folder's own tower (the i2v case writes it whole)
        model.model.vision_tower.load_state_dict(vision, strict=True)
        model.model.multi_modal_projector.load_state_dict(projector, strict=True)
    tokenizer = build_gemma_tokenizer(assets)
    processor = build_gemma_processor(assets, tokenizer.tokenizer)
else:
    tensors = load_file(str(path))
    language = {k.removeprefix("model."): v for k, v in tensors.items()
                if k.startswith("model.") and not k.startswith("model.diffusion_model.")}
    model.model.language_model.load_state_dict(language, strict=True)
    tokenizer = build_gemma_tokenizer(assets)

    class _TextProcessor:  # the tiny file has no image processor settings; text-only input is the tokenizer's
        def __init__(self, tok):
            self.tokenizer = tok

        def __call__(self, text, images=None, return_tensors="pt"):
            assert images is None
            return self.tokenizer(text, return_tensors=return_tensors)

    processor = _TextProcessor(tokenizer.tokenizer)
    LTXGemmaTextEncoder._model_type = lambda self: "gemma4"
model.tie_weights()
encoder = LTXGemmaTextEncoder(model=model, tokenizer=tokenizer, processor=processor, dtype=torch.float32)

recorded = []
_generate = model.generate


def _recording_generate(**kwargs):
    result = _generate(**kwargs)
    recorded.append((kwargs["input_ids"][0].clone(), result[0].clone(), kwargs.get("pixel_values"),
                     kwargs.get("token_type_ids")))
    return result


model.generate = _recording_generate
out = {}
for seed in settings["seeds"]:
    text = generate_enhanced_prompt(encoder, settings["prompt"], settings.get("image"), seed=seed)
    prompt_ids, all_ids, pixels, types = recorded[-1]
    if pixels is not None:
        out[f"pixels.{seed}"] = pixels
        out[f"token_types.{seed}"] = types[0]
    out[f"prompt_ids.{seed}"] = prompt_ids
    out[f"ids.{seed}"] = all_ids[len(prompt_ids):]
    out[f"text.{seed}"] = torch.tensor(list(text.encode()), dtype=torch.uint8)
outputs(out)
