"""The IC-LoRA fused around stage 1 only (`Models.ic_loras`, a stage's `loras`), as the reference's ICLoraPipeline
refines stage 2 without it: stage 1 runs with the LoRA fused, stage 2 with the weights exactly as loaded (so stage 2
is our stage 2 of the unfused model), and the weights after the run equal those before bit for bit (a pure copy),
also for fp8 weights; `ModelFiles` keeps a file stating a reference_downscale_factor out of the load-time fusion."""

from __future__ import annotations

from copy import deepcopy

import pytest
import torch
from support.control_video import FPS, FRAMES, write_video
from support.model_files import write_lora

from ltx2_core.conditioning import ControlCondition
from ltx2_core.demo import demo_lora
from ltx2_core.demo.models import demo_models
from ltx2_core.loader.lora import fuse_loras
from ltx2_core.model_files import ModelFiles
from ltx2_core.pipeline import LocalSampler, Request, check_request, sample_request
from ltx2_core.quant.policy import quantize_blocks


class RecordingSampler:
    """`LocalSampler` that notes the LoRAs of each stage and, per transformer forward, whether every weight is
    exactly the one `expected` of the stage (a state dict by stage name)."""

    def __init__(self, model, expected) -> None:
        self.inner, self.config, self.device = LocalSampler(model), model.config, torch.device("cpu")
        self.stage, self.forwards, self.loras = None, [], []
        state = model.state_dict(keep_vars=True)
        model.register_forward_pre_hook(lambda module, args: self.forwards.append(
            (self.stage, all(torch.equal(state[name], want) for name, want in expected[self.stage].items()))))

    def __call__(self, positive, negative, latent, stage, generator, *, progress=None):
        self.stage = stage.name
        self.loras.append((stage.name, [lora.name for lora, _ in stage.loras]))
        return self.inner(positive, negative, latent, stage, generator, progress=progress)


def _fused(model, loras) -> dict:
    """The state dict of a copy of `model` with `loras` fused (as `fused_loras` fuses them)."""
    copy = deepcopy(model)
    fuse_loras(copy, loras)
    return {name: tensor.clone() for name, tensor in copy.state_dict().items()}


@pytest.mark.parametrize("mode, fp8", [("two-stage", False), ("two-stage", True), ("distilled", False)],
                         ids=["two-stage", "two-stage-fp8", "distilled"])
def test_the_ic_lora_is_fused_for_stage_one_only_and_restored_exactly(tmp_path, mode, fp8):
    """Stage 1's forwards see the loaded weights with the IC-LoRA fused; stage 2's the loaded weights (distilled)
    or with the distilled LoRA alone (two-stage); after the run every tensor equals the loaded one bit for bit."""
    models = demo_models("2.3")
    if fp8:
        assert quantize_blocks(models.transformer) > 0
    ic = (demo_lora(models.transformer, seed=7, name="demo IC-LoRA"), 0.8)
    models = models._replace(ic_loras=(ic,))
    loaded = {name: tensor.clone() for name, tensor in models.transformer.state_dict().items()}
    stage2 = [(models.distilled_lora, 1.0)] if mode == "two-stage" else []
    expected = {"stage 1": _fused(models.transformer, [ic]), "stage 2": _fused(models.transformer, stage2)}
    control = write_video(tmp_path / "depth.mp4", width=128, height=128, frames=FRAMES)
    request = Request("a dancer", width=128, height=128, frames=FRAMES, fps=float(FPS), mode=mode,
                      steps=2 if mode == "two-stage" else None, controls=(ControlCondition(control, 1.0, 2),))
    check_request(request, models)
    sampler = RecordingSampler(models.transformer, expected)
    positive, negative = models.prompt_encoder.encode(request.prompt, "noise" if mode == "two-stage" else None)
    sample_request(request, models, positive, negative, sampler=sampler)
    assert sampler.loras == [("stage 1", ["demo IC-LoRA"]), ("stage 2", [lora.name for lora, _ in stage2])]
    assert {stage for stage, _ in sampler.forwards} == {"stage 1", "stage 2"}
    assert all(exact for _, exact in sampler.forwards)
    assert any(not torch.equal(expected["stage 1"][name], tensor) for name, tensor in loaded.items())  # it fused
    after = models.transformer.state_dict()
    assert all(torch.equal(after[name], tensor) for name, tensor in loaded.items())  # restored bit for bit


def test_model_files_keep_the_ic_lora_out_of_the_load_time_fusion(tmp_path, tiny_checkpoints, gemma_files):
    """A LoRA stating reference_downscale_factor goes to `Models.ic_loras`; a plain LoRA is fused at load."""
    plain = write_lora(tmp_path / "style.safetensors", 2)
    ic = write_lora(tmp_path / "depth.safetensors", 3, metadata={"reference_downscale_factor": "2"})
    files = ModelFiles(str(tiny_checkpoints["2.0"]), str(gemma_files[0]), loras=((str(plain), 0.7), (str(ic), 0.9)))
    assert files.split_loras() == (((str(plain), 0.7),), ((str(ic), 0.9),))
    models = files.load()
    assert [(lora.path, strength) for lora, strength in models.ic_loras] == [(str(ic), 0.9)]
    only_plain = ModelFiles(str(tiny_checkpoints["2.0"]), str(gemma_files[0]), loras=((str(plain), 0.7),)).load()
    want = only_plain.transformer.state_dict()
    assert all(torch.equal(tensor, want[name]) for name, tensor in models.transformer.state_dict().items())


def test_a_run_with_controls_keeps_every_lora_to_stage_one(tmp_path, tiny_checkpoints, gemma_files, monkeypatch):
    """With control videos every LoRA is the IC-LoRA pipeline's (the reference refines stage 2 without them), also an
    IC-LoRA stating no factor (factor 1): nothing is fused at load; the command line sets it from --control."""
    import ltx2_core.__main__ as cli
    from ltx2_core.loader.lora import load_lora, split_ic_loras

    bare = write_lora(tmp_path / "canny.safetensors", 2)  # an IC-LoRA without metadata
    files = ModelFiles(str(tiny_checkpoints["2.0"]), str(gemma_files[0]), loras=((str(bare), 0.8),), controls=True)
    assert files.split_loras() == ((), ((str(bare), 0.8),))
    models = files.load()
    assert [(lora.path, strength) for lora, strength in models.ic_loras] == [(str(bare), 0.8)]
    unfused = ModelFiles(str(tiny_checkpoints["2.0"]), str(gemma_files[0])).load().transformer.state_dict()
    assert all(torch.equal(tensor, unfused[name]) for name, tensor in models.transformer.state_dict().items())
    pair = (load_lora(bare), 0.8)
    assert split_ic_loras([pair]) == ((pair,), ()) and split_ic_loras([pair], controls=True) == ((), (pair,))

    seen = []

    def stop(args, request, files):
        seen.append(files)
        raise ValueError("stopped before model work")

    monkeypatch.setattr(cli, "check_early", stop)
    video = write_video(tmp_path / "edges.mp4")
    flags = ["generate", "--checkpoint", str(tiny_checkpoints["2.0"]), "--text-encoder", str(gemma_files[0]),
             "--width", "64", "--height", "64", "--frames", "9", "--lora", f"{bare}:0.8", "--output",
             str(tmp_path / "out.mp4")]
    assert cli.main([*flags, "--control", str(video)]) == 2 and cli.main(flags) == 2
    assert [files.controls for files in seen] == [True, False]
