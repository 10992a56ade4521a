"""TEST-ONLY script, run by tests/e2e/test_native_conditioning.py under ComfyUI's Python with ComfyUI's folder as
the working directory: ComfyUI 0.26.0's own LTX-2 text path (LTXAVTextEncoderLoader, CLIPTextEncode,
LTXVConditioning, and the checkpoint's diffusion model's `preprocess_text_embeds`) on the tiny Gemma 3 file and the
tiny native LTX-2.3 bundle.

ComfyUI hard-codes Gemma 3 12B's sizes, so a small shim (`tiny_sizes`, nothing else is patched) sets them to the
tiny model's before anything is built: the `Gemma3_12B_Config` sizes (and a 4-wide vision tower, as the tiny
file's multi-modal projector), the 3840·49 -> 4096 / 2048 `DualLinearProjection` of lt.py, and `load_sd`'s
"model.layers.47" test that tells the Gemma file from the checkpoint. ComfyUI's own code runs otherwise unchanged.

usage: python native_text_encode.py GEMMA_FILE CHECKPOINT PROMPT FRAME_RATE SIZES_JSON OUT.safetensors
writes: cond (the CONDITIONING tensor), context (the native model's connector outputs for it), metadata `options`
(the entry's dict, tensors left out), `passthrough` (whether the model takes connector outputs as they are),
`dtypes` (Gemma's and the projection's weights).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys


def tiny_sizes(sizes: dict) -> None:
    """Sets the sizes ComfyUI hard-codes for Gemma 3 12B and LTX-2's projection to the tiny model's."""
    from comfy.text_encoders import llama, lt

    gemma = {k: sizes["gemma"][k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                            "num_attention_heads", "num_key_value_heads")}
    vision = {**llama.GEMMA3_VISION_CONFIG, "hidden_size": 4, "intermediate_size": 8, "num_attention_heads": 1,
              "num_hidden_layers": 1}

    @dataclasses.dataclass
    class TinyGemma3Config(llama.Gemma3_12B_Config):
        def __post_init__(self):
            for key, value in gemma.items():
                setattr(self, key, value)
            self.head_dim = sizes["gemma"]["head_dim"]
            self.vision_config = vision

    llama.Gemma3_12B_Config = TinyGemma3Config
    projection = lt.DualLinearProjection

    def tiny_projection(in_dim, out_dim_video, out_dim_audio, **kwargs):
        return projection(sizes["features"], sizes["video"], sizes["audio"], **kwargs)

    lt.DualLinearProjection = tiny_projection
    load_sd = lt.LTXAVTEModel.load_sd
    last_layer = f"model.layers.{sizes['gemma']['num_hidden_layers'] - 1}.self_attn.q_norm.weight"

    def tiny_load_sd(self, sd):
        return self.gemma3_12b.load_sd(sd) if last_layer in sd else load_sd(self, sd)

    lt.LTXAVTEModel.load_sd = tiny_load_sd


def main(gemma_file: str, checkpoint: str, prompt: str, frame_rate: str, sizes: str, out: str) -> None:
    sys.path.insert(0, os.getcwd())
    argv, sys.argv = sys.argv, [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.cli_args  # parses --cpu now

    sys.argv = argv
    tiny_sizes(json.loads(sizes))
    import comfy.sd
    import folder_paths
    import torch
    from comfy_extras.nodes_lt import LTXVConditioning
    from comfy_extras.nodes_lt_audio import LTXAVTextEncoderLoader
    from safetensors.torch import save_file

    folder_paths.add_model_folder_path("text_encoders", os.path.dirname(gemma_file))
    folder_paths.add_model_folder_path("checkpoints", os.path.dirname(checkpoint))
    (clip,) = LTXAVTextEncoderLoader.execute(os.path.basename(gemma_file), os.path.basename(checkpoint)).result
    conditioning = clip.encode_from_tokens_scheduled(clip.tokenize(prompt))  # CLIPTextEncode
    positive, _ = LTXVConditioning.execute(conditioning, conditioning, float(frame_rate)).result
    (cond, options), = positive
    te = clip.cond_stage_model
    dtypes = {"gemma": str(next(te.gemma3_12b.parameters()).dtype),
              "projection": str(te.text_embedding_projection.video_aggregate_embed.weight.dtype)}

    model = comfy.sd.load_checkpoint_guess_config(checkpoint, output_vae=False, output_clip=False)[0].model
    dit = model.diffusion_model
    with torch.no_grad():
        context = dit.preprocess_text_embeds(cond.to(model.get_dtype_inference()), unprocessed=options[
            "unprocessed_ltxav_embeds"])
        passthrough = dit.preprocess_text_embeds(context, unprocessed=False) is context
    kept = {k: v for k, v in options.items() if v is None or isinstance(v, (bool, int, float, str))}
    save_file({"cond": cond.contiguous(), "context": context.float().contiguous()}, out,
              metadata={"options": json.dumps(kept), "passthrough": json.dumps(passthrough),
                        "dtypes": json.dumps(dtypes)})


if __name__ == "__main__":
    main(*sys.argv[1:])
