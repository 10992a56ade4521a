"""LoRA files: key layouts, alpha and strength, checks before any weight changes, exact restore."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from ltx2_core.demo import demo_lora, demo_transformer
from ltx2_core.loader import LoraError, fuse_loras, fused_loras, load_lora, load_transformer
from ltx2_core.loader.lora import Lora, LoraPair

TARGET = "transformer_blocks.1.attn1.to_q.weight"


def _write(path, lora: Lora, prefix="diffusion_model.", names=(".lora_A.weight", ".lora_B.weight"), alpha=None):
    tensors = {}
    for target, pair in lora.pairs.items():
        stem = prefix + target[: -len(".weight")]
        tensors[stem + names[0]] = pair.down.contiguous()
        tensors[stem + names[1]] = pair.up.contiguous()
        if alpha is not None:
            tensors[stem + ".alpha"] = torch.tensor(float(alpha))
    save_file(tensors, str(path))
    return path


def _expected(weight, pair, factor):
    return weight.float() + factor * pair.up @ pair.down


@pytest.mark.parametrize("layout", ["comfy", "peft-no-prefix", "kohya-alpha"])
def test_file_layouts_fuse_with_strength_and_alpha(tmp_path, layout):
    model = demo_transformer()
    lora = demo_lora(model, rank=4, seed=1)
    before = model.get_parameter(TARGET).detach().clone()
    if layout == "comfy":
        path, scale = _write(tmp_path / "l.safetensors", lora), 1.0
    elif layout == "peft-no-prefix":
        path, scale = _write(tmp_path / "l.safetensors", lora, prefix=""), 1.0
    else:
        path = _write(tmp_path / "l.safetensors", lora, names=(".lora_down.weight", ".lora_up.weight"), alpha=2.0)
        scale = 2.0 / 4
    loaded = load_lora(path)
    assert set(loaded.pairs) == set(lora.pairs)
    changed = fuse_loras(model, [(loaded, 0.8)])
    assert len(changed) == len(lora.pairs)
    torch.testing.assert_close(model.get_parameter(TARGET), _expected(before, lora.pairs[TARGET], 0.8 * scale),
                               atol=1e-6, rtol=1e-6)


def test_two_loras_add_up_and_the_context_restores_bit_for_bit():
    model = demo_transformer()
    first, second = demo_lora(model, seed=1), demo_lora(model, seed=2)
    originals = {k: v.clone() for k, v in model.state_dict().items()}
    with fused_loras(model, [(first, 1.0), (second, -0.5)]):
        want = _expected(originals[TARGET], first.pairs[TARGET], 1.0) - 0.5 * (
            second.pairs[TARGET].up @ second.pairs[TARGET].down)
        torch.testing.assert_close(model.get_parameter(TARGET), want, atol=1e-6, rtol=1e-6)
    with pytest.raises(RuntimeError, match="boom"), fused_loras(model, [(first, 1.0)]):
        raise RuntimeError("boom")
    for name, value in model.state_dict().items():
        assert torch.equal(value, originals[name]), name  # restored from copies, bit for bit


def test_a_lora_for_another_model_is_refused_before_any_weight_changes():
    model = demo_transformer()
    good = demo_lora(model)
    bad_shape = Lora("wide", {**good.pairs, TARGET: LoraPair(torch.zeros(4, 99), torch.zeros(16, 4), 1.0)})
    unknown = Lora("other", {"transformer_blocks.77.attn1.to_q.weight": good.pairs[TARGET]})
    originals = {k: v.clone() for k, v in model.state_dict().items()}
    for lora in (bad_shape, unknown):
        with pytest.raises(LoraError, match="does not fit this model"):
            fuse_loras(model, [(good, 1.0), (lora, 1.0)])
    for name, value in model.state_dict().items():
        assert torch.equal(value, originals[name]), name  # untouched: no weight was written
    with pytest.raises(ValueError, match="finite"):
        fuse_loras(model, [(good, float("nan"))])


def test_text_path_updates_are_skipped_and_stray_keys_refused(tmp_path, caplog):
    model = demo_transformer()
    pair = demo_lora(model).pairs[TARGET]
    text = Lora("text", {TARGET: pair, "video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q.weight": pair})
    assert fuse_loras(model, [(text, 1.0)]) == [TARGET]
    assert "text connectors are not applied" in caplog.text
    save_file({"diffusion_model.x.lora_A.weight": torch.zeros(2, 2), "stray": torch.zeros(1)},
              str(tmp_path / "s.safetensors"))
    with pytest.raises(LoraError, match="without a lora_A/lora_B"):
        load_lora(tmp_path / "s.safetensors")
    (tmp_path / "p.safetensors").write_bytes(b"\x80\x04\x95" + b"\x00" * 64)
    with pytest.raises(Exception, match="never pickles"):
        load_lora(tmp_path / "p.safetensors")


def test_load_transformer_fuses_loras_and_checks_them_first(tiny_checkpoints, tmp_path):
    path = tiny_checkpoints["2.0"]
    plain = load_transformer(path)
    lora = demo_lora(plain, seed=3)
    fused = load_transformer(path, loras=[(_write(tmp_path / "l.safetensors", lora), 0.5)])
    torch.testing.assert_close(fused.get_parameter(TARGET),
                               _expected(plain.get_parameter(TARGET), lora.pairs[TARGET], 0.5), atol=1e-6, rtol=1e-6)
    wrong = Lora("wrong", {TARGET: LoraPair(torch.zeros(4, 3), torch.zeros(3, 4), 1.0)})
    with pytest.raises(LoraError):
        load_transformer(path, loras=[(wrong, 1.0)])




def test_a_distilled_lora_that_cannot_refine_stage_two_is_refused_or_stated(tmp_path, caplog):
    """An IC-LoRA (its metadata states a reference_downscale_factor) is refused before any model work; a LoRA of the
    blocks' attention without their gates (LTX-2.0's layout) on a gated model (2.3, 2.5) fits the shapes and runs,
    and nothing in the file proves its release: a warning says what it looks like."""
    from support.model_files import write_lora

    from ltx2_core.demo.models import demo_models
    from ltx2_core.loader.lora import check_distilled_lora
    from ltx2_core.pipeline import Request, check_request

    ic = write_lora(tmp_path / "depth.safetensors", 3, metadata={"reference_downscale_factor": "1"})
    with pytest.raises(LoraError, match="depth.safetensors is an IC-LoRA .* cannot refine stage 2"):
        check_distilled_lora(ic)
    models = demo_models("2.3")
    request = Request("a cat", width=128, height=128, frames=9, steps=2, mode="two-stage")
    with pytest.raises(LoraError, match="is an IC-LoRA"):
        check_request(request, models._replace(distilled_lora=load_lora(ic)))
    old = load_lora(write_lora(tmp_path / "ltx-2-distilled.safetensors", 1, version="2.0"))
    with caplog.at_level("WARNING", logger="ltx2_core.loader.lora"):
        check_distilled_lora(old, gated=False)
        check_distilled_lora(load_lora(write_lora(tmp_path / "own.safetensors", 1, version="2.3")), gated=True)
        assert caplog.text == ""
        check_request(request, models._replace(distilled_lora=old))
    assert "ltx-2-distilled.safetensors updates the attention of the transformer blocks and none of their gates" \
        in caplog.text


def test_control_videos_with_loras_stating_no_factor_are_taken_at_factor_one_with_a_warning(tmp_path, caplog):
    from support.model_files import write_lora

    from ltx2_core.loader.lora import reference_downscale_factor

    plain = write_lora(tmp_path / "style.safetensors", 1)
    half = write_lora(tmp_path / "depth.safetensors", 2, metadata={"reference_downscale_factor": "2"})
    with caplog.at_level("WARNING", logger="ltx2_core.loader.lora"):
        assert reference_downscale_factor([half, plain]) == 2
        assert reference_downscale_factor([]) == 1
        assert caplog.text == ""
        assert reference_downscale_factor([plain]) == 1
    assert "none of the LoRAs (style.safetensors) states a reference_downscale_factor" in caplog.text
