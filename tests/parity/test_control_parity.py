"""IC-LoRA control on LTX-2.5 vs 1.2.0's `ICLoraPipeline` stage 1, run in the reference's own Python
(tests/parity/ref120/ic_lora.py); 2.0 and 2.3 are compared with 1.0.0 in-process in
tests/parity/test_denoise_parity.py.

Our side: `stages.sample` with `EncodedControl` conditions (random encoded latents: the encoder's parity is its own
test) on a tiny LTX-2.5 transformer file; the reference's: `_build_state(ModalitySpec(conditionings=[
VideoConditionByReferenceLatent(...)]))` (1.2.0 appends zeros as the guiding tokens' noisy placeholder and marks them
as no keyframes) + the audio from noise + `GuidedDenoiser` + `euler_denoising_loop`, on the same file, from our
generator's noise. Compared: the conditioned video state (clean values, positions, denoise mask; ≤ 1e-5) and the
video and audio latents after 3 guided steps with all four passes (atol=rtol=1e-4, as the other loops; measured max
|Δ| video / audio: 1.0e-5 / 1.0e-5 full size, 1.0e-5 / 1.1e-5 half size plus a weaker full-size control). With
attention weights (a control at attention strength 0.5, a half-size one with a pixel mask times 0.8, wrapped in
`ConditioningItemAttentionStrengthWrapper` with 1.2.0's `downsample_mask_video_to_latent`): the state's attention
weights too, and the steps with the log bias in every pass."""

from __future__ import annotations

import pytest
import torch
from support.reference120 import run_reference
from support.transformer25 import transformer25_metadata, write_transformer25

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import ControlCondition, EncodedControl, condition_video
from ltx2_core.conditioning.control import control_weights
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_latent_length, latent_shape, video_positions
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings

TOL = {"atol": 1e-4, "rtol": 1e-4}
FRAMES, HEIGHT, WIDTH, FPS, TEXT_TOKENS, SEED = 17, 64, 128, 24.0, 8, 13
# per control: (downscale factor, strength, attention strength, with a pixel-space attention mask)
CASES = {"full-size": [(1, 1.0, 1.0, False)], "half-size-and-weaker": [(2, 1.0, 1.0, False), (1, 0.7, 1.0, False)],
         "attention-and-mask": [(1, 1.0, 0.5, False), (2, 0.9, 0.8, True)]}


def _guidance(params) -> dict:
    return {"cfg": params.cfg, "stg": params.stg, "stg_blocks": list(params.stg_blocks), "rescale": params.rescale,
            "modality": params.modality}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(ours, reference): tensors by name."""
    folder = tmp_path_factory.mktemp("ic_lora")
    config = TransformerConfig.tiny("2.5")
    path = folder / "transformer-2.5.safetensors"
    write_transformer25(path, demo_transformer(config, seed=2).state_dict(), config,
                        metadata=transformer25_metadata(config, model_version="2.5.0"))
    model = load_transformer(path)
    g = torch.Generator().manual_seed(5)
    positive, negative = (TextEmbeddings(torch.randn(1, TEXT_TOKENS, config.video.context_dim, generator=g),
                                         torch.randn(1, TEXT_TOKENS, config.audio.context_dim, generator=g))
                          for _ in range(2))
    tensors = {"positive_video": positive.video, "positive_audio": positive.audio,
               "negative_video": negative.video, "negative_audio": negative.audio}
    guidance = default_guidance("2.5", config.num_layers)
    settings = {"path": str(path), "cases": {}}
    ours = {}
    frames, rows, cols = latent_shape(FRAMES, HEIGHT, WIDTH)
    for name, controls in CASES.items():
        conditions = []
        for i, (factor, strength, attention, masked) in enumerate(controls):
            grid = (frames, rows // factor, cols // factor)
            mask = torch.rand(FRAMES, HEIGHT, WIDTH, generator=g) if masked else None
            if masked:
                mask[:, : HEIGHT // 2] = 0.0  # never attended: the dtype's minimum as bias
                tensors[f"{name}.mask{i}"] = mask[None, None]
            weights = control_weights(ControlCondition("unused.mp4", strength, factor, attention, mask), FRAMES,
                                      HEIGHT, WIDTH, grid)
            conditions.append(EncodedControl(torch.randn(1, 128, *grid, generator=g), strength, factor, weights))
        tensors |= {f"{name}.control{i}": c.latent for i, c in enumerate(conditions)}
        state = condition_video(torch.zeros(1, frames * rows * cols, 128), video_positions(frames, rows, cols, FPS),
                                conditions, FPS)
        ours |= {f"{name}.positions": state.positions, f"{name}.mask": state.denoise_mask(),
                 f"{name}.clean": state.clean}
        if state.attention is not None:
            ours[f"{name}.attention"] = state.attention
        result = sample(model, positive, negative, empty_latent(WIDTH, HEIGHT, FRAMES, FPS),
                        Stage(ltx2_sigmas(3), video_guidance=guidance[0], audio_guidance=guidance[1],
                              conditions=conditions), torch.Generator().manual_seed(SEED))
        ours[f"{name}.video"], ours[f"{name}.audio"] = result.video, result.audio
        noise = torch.Generator().manual_seed(SEED)  # what the stage drew: video (with the guiding tokens), audio
        tensors |= {f"{name}.noise_video": torch.randn(1, state.clean.shape[1], 128, generator=noise),
                    f"{name}.noise_audio": torch.randn(1, audio_latent_length(FRAMES, FPS), 128, generator=noise)}
        settings["cases"][name] = {"frames": FRAMES, "height": HEIGHT, "width": WIDTH, "fps": FPS, "steps": 3,
                                   "controls": controls, "guidance": [_guidance(p) for p in guidance]}
        ours[f"{name}.free"] = sample(model, positive, negative, empty_latent(WIDTH, HEIGHT, FRAMES, FPS),
                                      Stage(ltx2_sigmas(3), video_guidance=guidance[0], audio_guidance=guidance[1]),
                                      torch.Generator().manual_seed(SEED)).video
    return ours, run_reference("ic_lora.py", tensors, settings, tmp_path=folder)


@pytest.mark.parametrize("case", list(CASES))
def test_the_conditioned_state_matches_the_reference(runs, case):
    ours, want = runs
    assert (f"{case}.attention" in ours) == (f"{case}.attention" in want)
    for key in ("clean", "positions", "mask", "attention")[: 4 if f"{case}.attention" in ours else 3]:
        assert ours[f"{case}.{key}"].shape == want[f"{case}.{key}"].shape
        torch.testing.assert_close(ours[f"{case}.{key}"], want[f"{case}.{key}"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", list(CASES))
def test_three_guided_steps_with_controls_match_the_reference(runs, case):
    ours, want = runs
    assert ours[f"{case}.video"].shape == want[f"{case}.video"].shape  # the guiding tokens are gone on both sides
    torch.testing.assert_close(ours[f"{case}.video"], want[f"{case}.video"], **TOL)
    torch.testing.assert_close(ours[f"{case}.audio"], want[f"{case}.audio"], **TOL)
    print(f"{case}: max |Δ| video {(ours[f'{case}.video'] - want[f'{case}.video']).abs().max():.2e} audio "
          f"{(ours[f'{case}.audio'] - want[f'{case}.audio']).abs().max():.2e}")
    assert (ours[f"{case}.video"] - ours[f"{case}.free"]).abs().max() > 0.01  # the controls changed the run
