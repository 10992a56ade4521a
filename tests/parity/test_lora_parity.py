"""LoRA fusion against the reference's `apply_loras` (bf16 weights, the way the released LoRAs are applied)."""

from __future__ import annotations

import torch

from ltx2_core.demo import demo_lora, demo_transformer
from ltx2_core.loader import fuse_loras
from ltx2_core.loader.lora import Lora, LoraPair
from support.reference import import_ltx_core

TARGET = "transformer_blocks.1.attn1.to_q.weight"


def test_same_fused_weights_as_the_reference_apply_loras_in_bf16():
    """The reference adds a bf16 delta to bf16 weights; we round fp32 W + delta once. Tolerance: one bf16 ulp
    of the result (rtol 2^-7), which is what the extra rounding of the reference can differ by."""
    import_ltx_core()
    from ltx_core.loader.fuse_loras import apply_loras
    from ltx_core.loader.primitives import LoraStateDictWithStrength, StateDict

    model = demo_transformer().to(torch.bfloat16)
    lora = demo_lora(model, seed=5, std=0.2)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    lora_sd = {}
    for target, pair in lora.pairs.items():
        lora_sd[target[: -len("weight")] + "lora_A.weight"] = pair.down.to(torch.bfloat16)
        lora_sd[target[: -len("weight")] + "lora_B.weight"] = pair.up.to(torch.bfloat16)
    lora = Lora(lora.name, {t: LoraPair(p.down.bfloat16().float(), p.up.bfloat16().float(), 1.0)
                            for t, p in lora.pairs.items()})
    fuse_loras(model, [(lora, 0.7)])
    ref = apply_loras(StateDict(weights, torch.device("cpu"), 0, {torch.bfloat16}),
                      [LoraStateDictWithStrength(StateDict(lora_sd, torch.device("cpu"), 0, {torch.bfloat16}), 0.7)])
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value.float(), ref.sd[name].float(), atol=1e-3, rtol=2**-7, msg=name)
    assert (model.get_parameter(TARGET).float() - weights[TARGET].float()).abs().max() > 1e-3
