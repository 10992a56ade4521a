"""The built-in tiny random-weight demo: every component of LTX-2 / LTX-2.3 at toy size, built in code.

It lets the whole path (command line, pipelines, nodes) run on any machine without the released weights, and gives
the tests their models. Production code never imports it at module level: only `ModelFiles`'s demo path does, when
no checkpoint is given.
"""

from ltx2_core.demo.decoders import DEMO_AUDIO_VAE, DEMO_VAES, DEMO_VOCODERS, demo_decoders, demo_upsampler
from ltx2_core.demo.models import demo_models
from ltx2_core.demo.text import DEMO_GEMMA, demo_prompt_encoder, demo_tokenizer, sentencepiece_model
from ltx2_core.demo.transformer import demo_inputs, demo_lora, demo_transformer, random_weights_

__all__ = [
    "DEMO_AUDIO_VAE",
    "DEMO_GEMMA",
    "DEMO_VAES",
    "DEMO_VOCODERS",
    "demo_decoders",
    "demo_inputs",
    "demo_lora",
    "demo_models",
    "demo_prompt_encoder",
    "demo_tokenizer",
    "demo_transformer",
    "demo_upsampler",
    "random_weights_",
    "sentencepiece_model",
]
