"""The HDR IC-LoRA's colour maths (`ltx2_core.hdr`) against ltx-core / ltx-pipelines 1.2.0: LogC3 and ACEScct
codes to linear Rec.709 (the curve's inverse, AP1 -> Rec.709 for ACEScct, clamp at 0) and the forward curves, fp32,
atol 1e-6 (the same fp32 formulas; the matrix product is an einsum on both sides, ours channel-last); the LoRA's HDR
settings from its metadata (equal exactly: strings and integers); the preview's sRGB OETF against the reference's
float64 one (ours fp32, atol 1e-6)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from support.reference120 import run_reference

from ltx2_core.hdr import HdrConfig, Transfer, hdr_config, hdr_lora_config, linear_to_acescct, linear_to_logc3, \
    srgb_preview

METADATA = [{"hdr_transform": "logc3", "reference_downscale_factor": "2"}, {"hdr_transform": "acescct"},
            {"hdr_transform": "true", "reference_downscale_factor": "4"}, {"use_hdr_transform": "1"},
            {"reference_downscale_factor": "2"}, {}]


def _loras(tmp_path) -> list[str]:
    paths = []
    for index, metadata in enumerate(METADATA):
        path = tmp_path / f"lora{index}.safetensors"
        save_file({"x.lora_A.weight": torch.zeros(1, 1)}, str(path), metadata=metadata)
        paths.append(str(path))
    return paths


def test_curves_config_and_preview_match_the_reference(tmp_path):
    generator = torch.Generator().manual_seed(0)
    # codes across [0, 1] with both sides of each break and values outside (clamped)
    codes = torch.cat([torch.linspace(-0.1, 1.1, 241), torch.rand(407, generator=generator)])
    codes = codes[:648].reshape(1, 3, 2, 6, 18)
    light = torch.cat([torch.logspace(-5, 2, 300), torch.tensor([0.0, -1.0, 0.0078125, 0.010591]),
                       torch.rand(344, generator=generator)])[:648].reshape(1, 3, 2, 6, 18)
    paths = _loras(tmp_path)
    ref = run_reference("hdr_color.py", {"codes": codes, "light": light}, {"loras": paths}, tmp_path)
    channel_last = codes[0].permute(1, 2, 3, 0)  # (F, H, W, 3)
    for transfer in Transfer:
        ours = transfer.to_linear(channel_last)
        expected = ref[f"{transfer.value}.linear"][0].permute(1, 2, 3, 0)
        torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-6)
        assert bool((ours > 1).any()) and bool((ours == 0).any())  # highlights above 1 survive, black clamps
    torch.testing.assert_close(linear_to_logc3(light), ref["logc3.compress"], atol=1e-6, rtol=0)
    torch.testing.assert_close(linear_to_acescct(light), ref["acescct.compress"], atol=1e-6, rtol=0)
    torch.testing.assert_close(srgb_preview(light).double(), ref["srgb"], atol=1e-6, rtol=0)
    expected = json.loads(bytes(ref["configs"].tolist()).decode())
    ours = []
    for path in paths:
        try:
            config = hdr_lora_config(path)
            ours.append([config.transfer.value, config.downscale])
        except ValueError as error:
            assert "not an HDR IC-LoRA" in str(error)
            ours.append(None)
    assert ours == expected  # strings and integers: exact


def test_bad_metadata_is_refused_naming_the_fix():
    assert hdr_config({}) is None
    assert hdr_config({"hdr_transform": "logc3"}) == HdrConfig(Transfer.LOGC3, 1)
    with pytest.raises(ValueError, match="known curves: logc3, acescct"):
        hdr_config({"hdr_transform": "pq"})
    with pytest.raises(ValueError, match="integer ≥ 1"):
        hdr_config({"hdr_transform": "logc3", "reference_downscale_factor": "0"})
