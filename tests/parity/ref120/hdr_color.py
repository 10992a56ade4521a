"""The reference side of tests/parity/test_hdr_parity.py: ltx-core 1.2.0's HDR curves (compress and to_linear of
LogC3 and ACEScct, on (1, 3, F, H, W) as its pipeline calls them), ltx-pipelines' HDR LoRA config of each metadata
case, and its sRGB OETF of the preview."""

import json

import numpy as np
import torch
from exchange import inputs, outputs
from ltx_core.hdr import HDRTransfer, to_hdr_linear
from ltx_pipelines.hdr_ic_lora import read_hdr_lora_config
from ltx_pipelines.utils.media_io.exr import _linear_to_srgb

t, settings = inputs()
out = {}
for transfer in HDRTransfer:
    out[f"{transfer.value}.linear"] = to_hdr_linear(t["codes"], transfer=transfer)
    out[f"{transfer.value}.compress"] = transfer.compress(t["light"])
out["srgb"] = torch.from_numpy(_linear_to_srgb(t["light"].double().numpy()).astype(np.float64))
configs = []
for path in settings["loras"]:
    config = read_hdr_lora_config(path)
    configs.append(None if config is None else [config.hdr_transform.value, config.reference_downscale_factor])
out["configs"] = torch.tensor(list(json.dumps(configs).encode()), dtype=torch.uint8)
outputs(out)
