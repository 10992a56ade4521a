"""TEST-ONLY script, run by tests/e2e/test_native_model.py under ComfyUI's Python with ComfyUI's folder as the working
directory: what ComfyUI 0.26.0 builds from a released DiT's state dict (its names and shapes, on `meta`) when no
`config` metadata comes with it, as ComfyUI-GGUF's UnetLoaderGGUF hands it a GGUF's tensors
(`comfy.sd.load_diffusion_model_state_dict` without metadata: `model_detection.detect_unet_config` alone).

usage: python detect_without_metadata.py PACK_ROOT VERSION OUT.json
writes: {"detected": the detected unet config, "no_place": the file's tensors the built model lacks (first names),
"absent": the model's tensors the file lacks, "mismatched": [name, file shape, model shape] of the rest that differ}
"""

from __future__ import annotations

import json
import os
import sys


def main(pack: str, version: str, out: str) -> None:
    sys.path.insert(0, os.getcwd())
    argv, sys.argv = sys.argv, [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.cli_args  # noqa: F401  (parses --cpu now)

    sys.argv = argv
    import comfy.model_detection
    import comfy.ops
    import torch
    from comfy.ldm.lightricks.av_model import LTXAVModel

    sys.path[:0] = [pack, os.path.join(pack, "tests")]
    from support.configs import released_transformer_configs

    from ltx2_core.model.transformer import LTX2Transformer

    with torch.device("meta"):
        state = LTX2Transformer(released_transformer_configs()[version]).state_dict()
    detected = comfy.model_detection.detect_unet_config(state, "")
    unet = comfy.model_detection.model_config_from_unet(state, "").unet_config
    built = LTXAVModel(**unet, device="meta", dtype=torch.bfloat16, operations=comfy.ops.disable_weight_init)
    theirs = {k: tuple(v.shape) for k, v in built.state_dict().items() if "embeddings_connector" not in k}
    result = {"detected": detected, "no_place": [k for k in state if k not in theirs],
              "absent": [k for k in theirs if k not in state],
              "mismatched": [[k, list(v.shape), list(theirs[k])] for k, v in state.items()
                             if k in theirs and tuple(v.shape) != theirs[k]]}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
