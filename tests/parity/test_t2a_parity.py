"""Text to audio vs ltx-core / ltx-pipelines 1.2.0 (`t2a_one_stage.py`): the transformer run audio-only (our `video`
None, the reference's `video=None`) and a few guided sampling steps of an audio-only latent, fp32, on a tiny 2.5
transformer file each side loads with its own loader.

Forward: per-token and uniform timesteps, STG of the audio self-attention and a [cond, uncond, STG] batch, against
1.2.0's LTXModel built whole (LTXModelConfigurator) and built audio-only (LTXAudioOnlyModelConfigurator with its
audio-only key map, what the T2A pipeline builds; 1.2.0's audio-only configurator does not read
`use_prompt_adaln_single` / `audio_ff_bias` and keeps its defaults, so it is checked on a structure with both on).
Tolerance atol=rtol=1e-5 as for the joint forward; measured max |Δ| 4.5e-6 (outputs up to ~7).

Loop: 3 steps of the LTX2 schedule with 2.5's audio guidance (its modality scale 3 becomes 1 without video, as the
reference sets it) from the same seed: the reference draws the audio noise first and no video noise; atol=rtol=1e-4
as for the joint loops, measured max |Δ| 1.2e-5 (values up to ~7).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.model.transformer import BatchPerturbations
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_audio_latent, sample
from ltx2_core.types import PassPerturbation, StreamInput, TextEmbeddings
from support.reference120 import run_reference
from support.transformer25 import write_transformer25

FORWARD_TOL = dict(atol=1e-5, rtol=1e-5)
LOOP_TOL = dict(atol=1e-4, rtol=1e-4)
AUDIO_TOKENS, TEXT_TOKENS, STG_BLOCK = 17, 8, 1
FRAMES, FPS, STEPS, SEED = 25, 24.0, 3, 13
CASES = {"uniform": ["none"], "held": ["none"], "stg": ["stg"], "passes": ["none", "none", "stg"]}
_PASSES = {"none": PassPerturbation(), "stg": PassPerturbation.stg((), [STG_BLOCK])}
# forward model -> (structure, reference build)
FORWARD = {"released": ("released", "whole"), "audio_only": ("adaln_biases", "audio_only"),
           "adaln_biases": ("adaln_biases", "whole")}


def _structures() -> dict[str, TransformerConfig]:
    released = TransformerConfig.tiny("2.5")
    return {"released": released,
            "adaln_biases": dataclasses.replace(released, prompt_adaln=True, audio_ff_bias=True)}


def _case(name: str, batch: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=g)

    sigma = torch.tensor({"uniform": [0.7], "held": [0.6], "stg": [0.5], "passes": [0.8] * 3}[name])
    at = sigma[:, None].expand(batch, AUDIO_TOKENS).clone()
    if name == "held":
        at[:, :5] = 0.0  # the first tokens held (e.g. a given sound)
    c = {"alat": randn(1, AUDIO_TOKENS, 128).expand(batch, -1, -1), "asigma": sigma, "at": at}
    if name == "passes":  # positive, negative, positive contexts
        pos, neg = randn(1, TEXT_TOKENS, 8), randn(1, TEXT_TOKENS, 8)
        c["actx"] = torch.cat([pos, neg, pos])
    else:
        c["actx"] = randn(batch, TEXT_TOKENS, 8)
    return {key: value.contiguous() for key, value in c.items()}


def _ours(model, c: dict[str, torch.Tensor], kinds: list[str]) -> tuple[torch.Tensor | None, torch.Tensor]:
    run = model.prepare_run(None, audio_positions(AUDIO_TOKENS), None, c["actx"])
    perturbations = None if set(kinds) == {"none"} else BatchPerturbations(
        [_PASSES[k] for k in kinds], model.config.num_layers, "cpu", torch.float32)
    at = c["at"] if (c["at"] != c["at"][:, :1]).any() else c["at"][:, :1]  # uniform as (B, 1), as the sampler does
    return model(None, StreamInput(c["alat"], c["asigma"], at), run, perturbations)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Our models (from the files), cases and loop result, and everything the reference computed, in one call."""
    folder = tmp_path_factory.mktemp("t2a")
    g = torch.Generator().manual_seed(3)
    cases = {name: _case(name, len(kinds), g) for name, kinds in CASES.items()}
    models, paths = {}, {}
    for seed, (name, config) in enumerate(_structures().items()):
        state = demo_transformer(config, seed).state_dict()
        paths[name] = str(write_transformer25(folder / f"{name}.safetensors", state, config))
        models[name] = load_transformer(paths[name])
    tensors = {f"{case}.{key}": value for case, c in cases.items() for key, value in c.items()}
    tensors["apos"] = audio_positions(AUDIO_TOKENS)

    model = models["released"]
    positive, negative = (TextEmbeddings(torch.randn(1, TEXT_TOKENS, 16, generator=g),
                                         torch.randn(1, TEXT_TOKENS, 8, generator=g)) for _ in range(2))
    _, audio_guidance = default_guidance("2.5", model.config.num_layers)
    stage = Stage(ltx2_sigmas(STEPS), audio_guidance=audio_guidance)
    loop = sample(model, positive, negative, empty_audio_latent(FRAMES, FPS), stage,
                  torch.Generator().manual_seed(SEED))
    tensors |= {"positive_audio": positive.audio, "negative_audio": negative.audio, "sigmas": stage.sigmas}
    settings = {"forward_models": {name: (paths[structure], build) for name, (structure, build) in FORWARD.items()},
                "cases": CASES, "stg_block": STG_BLOCK,
                "loop": {"path": paths["released"], "steps": STEPS, "frames": FRAMES, "fps": FPS, "seed": SEED,
                         "guidance": {"cfg": audio_guidance.cfg, "stg": audio_guidance.stg,
                                      "stg_blocks": list(audio_guidance.stg_blocks),
                                      "rescale": audio_guidance.rescale}}}
    want = run_reference("t2a.py", tensors, settings, tmp_path=folder)
    return models, cases, loop, audio_guidance, want


@pytest.mark.parametrize("name", list(FORWARD))
@pytest.mark.parametrize("case", list(CASES))
def test_audio_only_forward_matches_the_reference(outputs, name, case):
    models, cases, _, _, want = outputs
    video, audio = _ours(models[FORWARD[name][0]], cases[case], CASES[case])
    assert video is None
    torch.testing.assert_close(audio, want[f"{name}.{case}.audio"], **FORWARD_TOL)


def test_the_forward_cases_change_the_output(outputs):
    """Held tokens and STG move the prediction (so those cases test something)."""
    models, cases, _, _, _ = outputs
    model = models["released"]
    uniform = _ours(model, cases["uniform"], ["none"])[1]
    held = _ours(model, dict(cases["uniform"], at=cases["held"]["at"]), ["none"])[1]
    stg = _ours(model, dict(cases["uniform"]), ["stg"])[1]
    assert (held - uniform).abs().max() > 1e-3 and (stg - uniform).abs().max() > 1e-3


def test_guided_t2a_steps_match_the_reference_pipeline(outputs):
    _, _, loop, audio_guidance, want = outputs
    assert loop.video is None and audio_guidance.modality != 1.0 and audio_guidance.cfg != 1.0
    torch.testing.assert_close(ltx2_sigmas(STEPS), want["sigmas"], atol=1e-6, rtol=0)
    assert loop.audio.shape == want["loop.audio"].shape
    torch.testing.assert_close(loop.audio, want["loop.audio"], **LOOP_TOL)
