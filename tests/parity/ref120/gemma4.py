"""The reference side of tests/parity/test_gemma4_parity.py: ltx-core 1.2.0's text path on the tiny LTX-2.5 files.

Gemma 4 is built as 1.2.0 builds it (`GemmaAssets.from_single_file`, its config through `build_gemma_hf_config`,
`AutoModelForImageTextToText.from_config`), but not on `meta`: 1.2.0's own buffer rebuild fails when the full layers'
head size differs from the sliding layers' (docs/ltx25/text.md §1), so transformers computes the buffers. Its
language model takes the file's flat `model.*` tensors. The tokenizer is 1.2.0's (`build_gemma_hf_tokenizer` in
`LTXGemmaTokenizer`), the encoder `LTXGemmaTextEncoder.encode` (one batched Gemma forward), the embeddings
processor 1.2.0's builder over (transformer file, text encoder file) with `EMBEDDINGS_PROCESSOR_KEY_OPS`, per prompt.
"""

from pathlib import Path

import torch
from exchange import inputs, outputs
from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.text_encoders.gemma import embeddings_connector
from ltx_core.text_encoders.gemma.encoders.base_encoder import LTXGemmaTextEncoder
from ltx_core.text_encoders.gemma.encoders.encoder_configurator import (
    EMBEDDINGS_PROCESSOR_KEY_OPS,
    EmbeddingsProcessorConfigurator,
)
from ltx_core.text_encoders.gemma.gemma_assets import GemmaAssets, build_gemma_hf_config, build_gemma_hf_tokenizer
from ltx_core.text_encoders.gemma.tokenizer import LTXGemmaTokenizer, PaddingSide
from safetensors.torch import load_file
from transformers import AutoModelForImageTextToText

_, settings = inputs()
max_length, prompts = settings["max_length"], settings["prompts"]

# 1.2.0's configurators leave the connectors' register count at its default (128, the released value): the tiny
# connectors have fewer, given here as that default
_connector_init = embeddings_connector.Embeddings1DConnector.__init__


def _tiny_registers(self, *args, **kwargs):
    kwargs.setdefault("num_learnable_registers", settings["registers"])
    _connector_init(self, *args, **kwargs)


embeddings_connector.Embeddings1DConnector.__init__ = _tiny_registers


def tokenizer(path: str) -> LTXGemmaTokenizer:
    assets = GemmaAssets.from_single_file(Path(path))
    return LTXGemmaTokenizer(build_gemma_hf_tokenizer(assets, max_length), max_length, PaddingSide.LEFT)


out = {}
for name, path in settings["tokenizers"].items():  # other tokenizer configs: ids and masks only
    for i, prompt in enumerate(prompts):
        pairs = tokenizer(path).tokenize_with_weights(prompt)["gemma"]
        out[f"{name}.ids.{i}"] = torch.tensor([t for t, _ in pairs])
        out[f"{name}.mask.{i}"] = torch.tensor([w for _, w in pairs])

text_encoder = settings["text_encoder"]
config = build_gemma_hf_config(GemmaAssets.from_single_file(Path(text_encoder)))
model = AutoModelForImageTextToText.from_config(config).eval()
tensors = load_file(text_encoder)
language_model = {k.removeprefix("model."): v for k, v in tensors.items()
                  if k.startswith("model.") and not k.startswith("model.diffusion_model.")}
model.model.language_model.load_state_dict(language_model, strict=True)

encoder = LTXGemmaTextEncoder(model=model, tokenizer=tokenizer(text_encoder), dtype=torch.float32)
encoded = encoder.encode(prompts)
builder = SingleGPUModelBuilder(
    model_class_configurator=EmbeddingsProcessorConfigurator.with_gemma_model_path(text_encoder),
    model_path=(settings["transformer"], text_encoder), model_sd_ops=EMBEDDINGS_PROCESSOR_KEY_OPS)
processor = builder.build(device=torch.device("cpu"), dtype=torch.float32).eval()
missing = [name for name, p in processor.named_parameters() if p.is_meta]
if missing:  # the builder loads strict=False: a key the files miss would stay on meta
    raise SystemExit(f"embeddings processor weights missing from the files: {missing[:5]}")
for i, (hidden_states, mask) in enumerate(encoded):
    out[f"mask.{i}"] = mask[0]
    out[f"ids.{i}"] = torch.tensor([t for t, _ in encoder.tokenizer.tokenize_with_weights(prompts[i])["gemma"]])
    for layer, h in enumerate(hidden_states):
        out[f"hidden.{i}.{layer}"] = h[0]
    result = processor.process_hidden_states(hidden_states, mask)
    out[f"video.{i}"], out[f"audio.{i}"] = result.video_encoding[0], result.audio_encoding[0]
outputs(out)
