"""Prompt encoding: positive and negative prompt in one batched Gemma pass."""

from __future__ import annotations

from ltx2_core import DEFAULT_NEGATIVE_PROMPT, PromptEncoder
from ltx2_core.stages import encode

from .handles import CONDITIONING, TEXT_ENCODER, Conditioning
from .images import first_frame_uint8
from .native_conditioning import to_native
from .sampling import MAX_SEED
from .validation import stated_limits


def prompt_problem(prompt: str | None) -> str | None:
    """For VALIDATE_INPUTS: why a prompt cannot be used (None when fine, or linked: unknown until run time)."""
    if isinstance(prompt, str) and not prompt.strip():
        return "prompt: the prompt is empty; describe the video (and its sound) to generate"
    return text_problem("prompt", prompt)


def text_problem(name: str, text: str | None) -> str | None:
    """Why `text` is no text the tokenizer can take (not a string, or a lone surrogate); None when fine or linked."""
    if text is None:
        return None
    if not isinstance(text, str):
        return f"{name}: text expected, got {type(text).__name__}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{name}: character {exc.start} ({text[exc.start]!a}, a lone surrogate) is no valid text; remove it"
    return None


class LTX2TextEncode:
    DESCRIPTION = ("Encodes the prompt and the negative prompt in one batched text-encoder pass; also as ComfyUI's "
                   "own CONDITIONING for native guiders and samplers (CFGGuider, LTXVConditioning, ...). With "
                   "enhance_prompt the loaded Gemma first rewrites the prompt (Lightricks' prompt enhancement, "
                   "seeded), shown on the node and given as the prompt output.")
    CATEGORY = "LTX-2/conditioning"
    RETURN_TYPES = (CONDITIONING, "CONDITIONING", "CONDITIONING", "STRING")
    RETURN_NAMES = ("conditioning", "positive", "negative", "prompt")
    OUTPUT_TOOLTIPS = ("both prompts, for our sampler", "the prompt as ComfyUI's CONDITIONING (the model's text "
                       "contexts, ready for ComfyUI's LTX-2 model)", "the negative prompt the same way (zeros when "
                       "it is empty, as ConditioningZeroOut)", "the prompt encoded: the enhanced one with "
                       "enhance_prompt, else the prompt as given")
    FUNCTION = "encode"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "text_encoder": (TEXT_ENCODER, {"tooltip": "from LTX2 Text Encoder Loader"}),
            "prompt": ("STRING", {"multiline": True, "default": "",
                                  "tooltip": "what to see and hear: the scene, the motion, the sounds and speech"}),
            "negative_prompt": ("STRING", {"multiline": True, "default": DEFAULT_NEGATIVE_PROMPT,
                                           "tooltip": "what to avoid (used by CFG); the release's by default"}),
        }, "optional": {
            "enhance_prompt": ("BOOLEAN", {"default": False, "tooltip": "rewrite the prompt with the loaded Gemma "
                               "first (Lightricks' system prompt, from an installed ltx-core: pip install --no-deps "
                               "ltx-core==1.0.0, or system_prompt)"}),
            "seed": ("INT", {"default": 0, "min": 0, "max": MAX_SEED, "control_after_generate": True,
                             "tooltip": "seed of the enhancement (Gemma 3 samples; Gemma 4 is greedy)"}),
            "image": ("IMAGE", {"tooltip": "the video's first image (its first frame): the enhancer sees it and "
                                "uses Lightricks' image-to-video system prompt (Gemma 3; LTX-2.5's Gemma 4 enhances "
                                "from the text alone)"}),
            "system_prompt": ("STRING", {"default": "", "tooltip": "a text file holding the enhancer's system "
                                         "prompt; empty: Lightricks' from an installed ltx-core"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, prompt: str | None = None):
        """Named inputs only: ComfyUI skips its own range checks for every input when this takes **kwargs. A linked
        input is None here (known only at run time)."""
        return stated_limits(cls, "prompt", prompt) or prompt_problem(prompt) or True

    def encode(self, text_encoder: PromptEncoder, prompt: str, negative_prompt: str = DEFAULT_NEGATIVE_PROMPT,
               enhance_prompt: bool = False, seed: int = 0, image=None, system_prompt: str = ""):
        if problem := prompt_problem(prompt) or text_problem("negative_prompt", negative_prompt):
            raise ValueError(problem)
        if enhance_prompt:
            from ltx2_core.model.text.enhance import enhance_prompt as enhance, system_prompt as find_system

            pixels = None
            if image is not None:
                if image.ndim != 4 or not 1 <= image.shape[-1] <= 4:
                    raise ValueError(f"image must be a ComfyUI IMAGE (batch, height, width, channels), got shape "
                                     f"{tuple(image.shape)}")
                pixels = first_frame_uint8(image)
            find_system("gemma3", pixels is not None, system_prompt or None)  # refused before Gemma runs
            prompt = enhance(text_encoder, prompt, seed=seed, image=pixels,
                             system_prompt_file=system_prompt or None).text or prompt
        positive, negative = encode(text_encoder, prompt, negative_prompt or None)
        unconditional = negative if negative is not None else positive._replace(video=positive.video * 0,
                                                                                audio=positive.audio * 0)
        result = (Conditioning(positive, negative), to_native(positive), to_native(unconditional), prompt)
        return {"ui": {"text": [prompt]}, "result": result}
