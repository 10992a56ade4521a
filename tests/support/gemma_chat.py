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
