"""A tiny Gemma 3 that can chat (prompt enhancement, issue 37), built inside the tests: the Hugging Face folder of
`support.gemma` plus Gemma's turn and image tokens added to its tokenizer, Gemma 3's chat template, the processor
files `Gemma3Processor` reads, and a top-level `eos_token_id` [eos, <end_of_turn>] as google/gemma-3-12b-it's
config.json has it.

`GEMMA3_CHAT_TEMPLATE` is Gemma 3's released template (google/gemma-3-12b-it, tokenizer_config.json): our own
formatter (`ltx2_core.model.text.chat`) is tested equal to transformers' rendering of it.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.gemma import write_hf_folder

TURN_TOKENS = ["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<image_soft_token>"]
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n"
    "{%- endif -%}\n"
)
IMAGE_TOKENS = 4  # mm_tokens_per_image of the tiny vision tower (a 2x2 pooled grid)
# a SigLIP tower at toy size: 28x28 pixels in 7x7 patches (a 4x4 grid pooled to 2x2 = IMAGE_TOKENS)
VISION = {"model_type": "siglip_vision_model", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
          "num_attention_heads": 2, "image_size": 28, "patch_size": 7, "vision_use_head": False}
PREPROCESSOR = {"image_processor_type": "Gemma3ImageProcessor", "do_resize": True, "size": {"height": 28, "width": 28},
                "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": None,
                "do_pan_and_scan": None, "processor_class": "Gemma3Processor"}


def write_chat_folder(folder: Path, *, template: bool = True) -> Path:
    """The tiny Gemma 3 folder with chat tokens (ids after the SentencePiece vocabulary), its chat template (unless
    `template` is False: then our own formatter renders the turns) and the processor files."""
    from transformers import AutoTokenizer

    write_hf_folder(folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    tokenizer.add_special_tokens({"additional_special_tokens": TURN_TOKENS})
    tokenizer.save_pretrained(str(folder))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in TURN_TOKENS}
    config_file = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_file.read_text())
    tokenizer_config.pop("chat_template", None)
    if template:
        tokenizer_config["chat_template"] = GEMMA3_CHAT_TEMPLATE
    tokenizer_config["extra_special_tokens"] = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                                                "image_token": "<image_soft_token>"}
    config_file.write_text(json.dumps(tokenizer_config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config.update(eos_token_id=[1, ids["<end_of_turn>"]], image_token_index=ids["<image_soft_token>"],
                  boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
                  mm_tokens_per_image=IMAGE_TOKENS, vision_config=VISION)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "processor_config.json").write_text(json.dumps({"processor_class": "Gemma3Processor",
                                                              "image_seq_length": IMAGE_TOKENS}))
    (folder / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR))
    return folder


def write_vision_weights(folder: Path) -> Path:
    """Random weights of the tiny vision tower and projector, in the folder's shard as google/gemma-3-12b-it keeps
    them (`vision_tower.vision_model.*`, `multi_modal_projector.*`), replacing `support.gemma`'s stand-ins."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file
    from transformers import Gemma3Config, SiglipVisionModel
    from transformers.models.gemma3.modeling_gemma3 import Gemma3MultiModalProjector

    config = Gemma3Config(**{k: v for k, v in json.loads((folder / "config.json").read_text()).items()
                             if k not in ("architectures", "model_type")})
    torch.manual_seed(3)
    tower, projector = SiglipVisionModel(config.vision_config), Gemma3MultiModalProjector(config)
    tensors = {"vision_tower.vision_model." + k.removeprefix("vision_model."): v for k, v in tower.state_dict().items()}
    tensors |= {"multi_modal_projector." + k: 0.5 * torch.randn_like(v) for k, v in projector.state_dict().items()}
    shard = folder / "model-00002-of-00002.safetensors"
    with safe_open(str(shard), "pt") as f:
        kept = {k: f.get_tensor(k) for k in f.keys() if not k.startswith(("vision_tower.", "multi_modal_projector."))}
    save_file({k: v.contiguous() for k, v in (kept | tensors).items()}, str(shard))
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: v for k, v in index["weight_map"].items() if not k.startswith("vision_tower.")}
    index["weight_map"] |= dict.fromkeys(tensors, shard.name)
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder
