"""TEST-ONLY script, run by tests/e2e/test_native_model.py under ComfyUI's Python with ComfyUI's folder as the working
directory: ComfyUI 0.26.0's own LTXAVModel built at a released size on the `meta` device (no memory), as Load
Checkpoint builds it from a released file's `transformer` metadata, and our transformer and connectors adopted from
it (nodes/native_model.py), as LTX-2 SamplerCustomAdvanced adopts a real one.

usage: python native_released_meta.py PACK_ROOT SECTION_JSON OUT.json
writes: {"linears": our Linear layers that are ComfyUI's modules, "ours": our tensors' count, "native": ComfyUI's
DiT tensors' count (connectors left out), "bytes": our tensors' bf16 bytes, "error": the ValueError, if refused}
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys


def main(pack: str, section: str, out: str) -> None:
    sys.path.insert(0, os.getcwd())
    argv, sys.argv = sys.argv, [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.cli_args  # noqa: F401  (parses --cpu now)

    sys.argv = argv
    import comfy.ops
    import torch
    from comfy.ldm.lightricks.av_model import LTXAVModel

    sys.path.insert(0, pack)  # ltx2_core; the pack's nodes/native_model.py by path (ComfyUI owns `nodes`)
    spec = importlib.util.spec_from_file_location("ltx2_native_model", os.path.join(pack, "nodes", "native_model.py"))
    native_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native_model)

    dit_config = {**json.loads(section), "image_model": "ltxav"}  # model_detection: the metadata section merged in
    theirs = LTXAVModel(**dit_config, device="meta", dtype=torch.bfloat16, operations=comfy.ops.disable_weight_init)
    meta = torch.device("meta")
    result = {"native": sum(1 for k in theirs.state_dict() if "embeddings_connector" not in k)}
    try:
        config, text = native_model.native_configs(dit_config)
        ours = native_model.native_transformer(theirs, config, meta, torch.bfloat16)
        native_model.native_connectors(theirs, text, meta, torch.bfloat16)
    except ValueError as exc:
        result["error"] = str(exc)
    else:
        modules = dict(theirs.named_modules())
        result |= {"linears": sum(1 for name, m in ours.named_modules() if modules.get(name) is m and name),
                   "ours": len(ours.state_dict()), "bytes": sum(t.numel() * 2 for t in ours.state_dict().values())}
    with open(out, "w") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main(*sys.argv[1:])
