"""Our LTX-2.5 transformer vs ltx-core 1.2.0's LTXModel, loaded by each side's own loader from the same tiny 2.5
transformer file (`support.transformer25`: the released layout and metadata), fp32, one forward per case.

Two structures: the release's (no feed-forward biases, no prompt AdaLN, so text K/V come from the run's cache) and
a variant with everything else the 1.2.0 configurator reads switched the other way (prompt AdaLN on, video
feed-forward biases, the keyframe embedding). The cases cover what 2.5 changes: per-token timesteps (the audio<->video
scale/shift follow each stream's own timesteps in 1.2.0), streams at different sigmas, STG, modality isolation and
all four guidance passes as one batch. Tolerance atol=rtol=1e-5 as for 2.0/2.3; measured max |Δ| 6.7e-6 (outputs
up to ~10).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.model.transformer import BatchPerturbations
from ltx2_core.model.transformer.model import first_frame_mask
from ltx2_core.types import PassPerturbation, StreamInput
from support.reference120 import run_reference
from support.transformer25 import write_transformer25

TOL = dict(atol=1e-5, rtol=1e-5)
FRAMES, ROWS, COLS, AUDIO_TOKENS, TEXT_TOKENS, FPS = 3, 2, 3, 17, 8, 24.0
VIDEO_TOKENS = FRAMES * ROWS * COLS
STG_BLOCK = 1
# case -> the pass of each sample of the batch
CASES = {"uniform": ["none"], "first_frame": ["none"], "two_sigmas": ["none", "none"], "audio_held": ["none"],
         "stg": ["stg"], "isolated": ["isolated"], "passes": ["none", "none", "stg", "isolated"]}
_PASSES = {"none": PassPerturbation(), "stg": PassPerturbation.stg([STG_BLOCK], [STG_BLOCK]),
           "isolated": PassPerturbation.isolated()}


def _structures() -> dict[str, TransformerConfig]:
    released = TransformerConfig.tiny("2.5")
    variant = dataclasses.replace(released, prompt_adaln=True, ff_bias=True, keyframe_embedding=True)
    return {"released": released, "variant": variant}


def _case(name: str, batch: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=g)

    sigma = {"uniform": [0.7], "first_frame": [0.6], "two_sigmas": [0.9, 0.25], "audio_held": [0.7], "stg": [0.5],
             "isolated": [0.5], "passes": [0.8] * 4}[name]
    vsigma = torch.tensor(sigma)
    asigma = torch.zeros(1) if name == "audio_held" else vsigma.clone()  # e.g. a held audio track: σ 0
    vt = vsigma[:, None].expand(batch, VIDEO_TOKENS).clone()
    if name == "first_frame":
        vt[:, : ROWS * COLS] = 0.0  # the first latent frame is an image condition
    c = {"vlat": randn(1, VIDEO_TOKENS, 128).expand(batch, -1, -1),
         "alat": randn(1, AUDIO_TOKENS, 128).expand(batch, -1, -1), "vsigma": vsigma, "asigma": asigma, "vt": vt,
         "at": asigma[:, None].expand(batch, AUDIO_TOKENS)}
    if name == "passes":  # positive, negative, positive, positive contexts
        pos_v, neg_v = randn(1, TEXT_TOKENS, 16), randn(1, TEXT_TOKENS, 16)
        pos_a, neg_a = randn(1, TEXT_TOKENS, 8), randn(1, TEXT_TOKENS, 8)
        c["vctx"], c["actx"] = torch.cat([pos_v, neg_v, pos_v, pos_v]), torch.cat([pos_a, neg_a, pos_a, pos_a])
    else:
        c["vctx"], c["actx"] = randn(batch, TEXT_TOKENS, 16), randn(batch, TEXT_TOKENS, 8)
    return {key: value.contiguous() for key, value in c.items()}


def _ours(model, c: dict[str, torch.Tensor], kinds: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    run = model.prepare_run(video_positions(FRAMES, ROWS, COLS, FPS), audio_positions(AUDIO_TOKENS), c["vctx"],
                            c["actx"])
    perturbations = None if set(kinds) == {"none"} else BatchPerturbations(
        [_PASSES[k] for k in kinds], model.config.num_layers, "cpu", torch.float32)
    # uniform timesteps as (B, 1), as the sampler passes them without a mask
    vt = c["vt"] if (c["vt"] != c["vt"][:, :1]).any() else c["vt"][:, :1]
    return model(StreamInput(c["vlat"], c["vsigma"], vt), StreamInput(c["alat"], c["asigma"], c["at"][:, :1]), run,
                 perturbations)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Both structures written as 2.5 transformer files and loaded by our loader; the reference's outputs of every
    case from one reference call."""
    folder = tmp_path_factory.mktemp("transformer25")
    g = torch.Generator().manual_seed(7)
    cases = {name: _case(name, len(kinds), g) for name, kinds in CASES.items()}
    models, paths = {}, {}
    for seed, (name, config) in enumerate(_structures().items()):
        state = demo_transformer(config, seed).state_dict()
        paths[name] = str(write_transformer25(folder / f"{name}.safetensors", state, config))
        models[name] = load_transformer(paths[name])
    tensors = {f"{case}.{key}": value for case, c in cases.items() for key, value in c.items()}
    vpos = video_positions(FRAMES, ROWS, COLS, FPS)
    tensors |= {"vpos": vpos, "apos": audio_positions(AUDIO_TOKENS), "keyframes": first_frame_mask(vpos, torch.float32)}
    settings = {"models": paths, "cases": CASES, "stg_block": STG_BLOCK,
                "keyframes": {name: m.config.keyframe_embedding for name, m in models.items()}}
    want = run_reference("transformer25.py", tensors, settings, tmp_path=folder)
    return models, cases, want


def test_the_files_load_as_their_structures(outputs):
    models, _, _ = outputs
    assert models["released"].config == TransformerConfig.tiny("2.5")
    released = dict(models["released"].named_parameters())
    assert not any(name.endswith(("ff.net.0.proj.bias", "ff.net.2.bias")) for name in released)
    assert "prompt_adaln_single.linear.weight" not in released  # no prompt AdaLN, but the blocks' static tables
    assert "transformer_blocks.0.prompt_scale_shift_table" in released
    variant = models["variant"].config
    assert (variant.prompt_adaln, variant.ff_bias, variant.audio_ff_bias, variant.keyframe_embedding) == (
        True, True, False, True)


@pytest.mark.parametrize("structure", ["released", "variant"])
@pytest.mark.parametrize("case", list(CASES))
def test_forward_matches_the_reference(outputs, structure, case):
    models, cases, want = outputs
    video, audio = _ours(models[structure], cases[case], CASES[case])
    torch.testing.assert_close(video, want[f"{structure}.{case}.video"], **TOL)
    torch.testing.assert_close(audio, want[f"{structure}.{case}.audio"], **TOL)


def test_the_cases_exercise_what_2_5_changed(outputs):
    """The released structure's text K/V come from the run's cache; the keyframe mask marks the first latent
    frame; per-token timesteps and a held audio change the output (so those cases test something)."""
    models, cases, _ = outputs
    model = models["released"]
    run = model.prepare_run(video_positions(FRAMES, ROWS, COLS, FPS), audio_positions(AUDIO_TOKENS),
                            cases["uniform"]["vctx"], cases["uniform"]["actx"])
    assert run.text_kv is not None and len(run.text_kv) == model.config.num_layers
    mask = first_frame_mask(video_positions(FRAMES, ROWS, COLS, FPS), torch.float32)[0, :, 0]
    assert mask.tolist() == [1.0] * (ROWS * COLS) + [0.0] * (VIDEO_TOKENS - ROWS * COLS)
    uniform = _ours(model, cases["uniform"], ["none"])
    for case in ("first_frame", "audio_held"):
        changed = dict(cases["uniform"], vt=cases[case]["vt"], asigma=cases[case]["asigma"], at=cases[case]["at"])
        assert (_ours(model, changed, ["none"])[0] - uniform[0]).abs().max() > 1e-3, case
