"""Audio-to-video denoising vs the reference pipeline `A2VidPipelineTwoStage` (ltx_pipelines 1.0.0), fp32, tiny
weights: its two calls of `denoise_video_only` (stage 1 with the video guider and an unguided audio guider, stage 2
unguided from the stage-1 video), with the encoded audio as the frozen audio latent of both, on one noise generator.

Our side is the pipeline's own path: `stages.sample` with an `EncodedAudio` condition (strength 1) in each stage.
The audio latent is our encoder's (its parity with the reference's is tests/parity/test_audio_encoder_parity.py);
stage 2 starts from the stage-1 video at the same size on both sides (the upsampler's parity is its own test).
Tolerance atol=rtol=1e-4, as the other multi-step loops (tests/parity/test_denoise_parity.py).
"""

from __future__ import annotations

import pytest
import torch

from ltx2_core.audio_io import Waveform
from ltx2_core.conditioning import AudioCondition, EncodedImage, encode_audio_condition
from ltx2_core.demo.decoders import demo_audio_encoder
from ltx2_core.geometry import audio_latent_length
from ltx2_core.sampling.recipe import uncond_contexts
from ltx2_core.sampling import STAGE2_SIGMAS, GuidanceParams, ltx2_sigmas, sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import AVLatent, empty_latent, sample
from support.reference import import_ltx_pipelines
from parity.test_denoise_parity import (
    FPS,
    FRAMES,
    HEIGHT,
    SEED,
    STG_BLOCK,
    TOL,
    WIDTH,
    _models,
    _reference_items,
    _texts,
)

VIDEO_GUIDANCE = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(STG_BLOCK,), rescale=0.7, modality=3.0)


def _encoded_audio() -> torch.Tensor:
    """A second of noisy chirp at 44.1 kHz stereo, encoded for the clip: (1, 8, T, 16)."""
    t = torch.arange(44100) / 44100
    left = 0.5 * torch.sin(2 * torch.pi * (200 + 400 * t) * t)
    hiss = 0.05 * torch.randn(44100, generator=torch.Generator().manual_seed(3))
    right = 0.3 * torch.sin(2 * torch.pi * 330 * t) + hiss
    encoded, _ = encode_audio_condition(AudioCondition(Waveform(torch.stack([left, right]), 44100), start=0.1),
                                        demo_audio_encoder(), FRAMES / FPS, audio_latent_length(FRAMES, FPS))
    return encoded.latent


def _reference_a2v(ref, positive, negative, audio, images=()):
    """Both stages as A2VidPipelineTwoStage runs them (same size in both; no upsampler between)."""
    import_ltx_pipelines()
    from ltx_core.components.diffusion_steps import EulerDiffusionStep
    from ltx_core.components.guiders import MultiModalGuider, MultiModalGuiderParams
    from ltx_core.components.noisers import GaussianNoiser
    from ltx_core.model.transformer import X0Model
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.utils.helpers import (
        denoise_video_only,
        multi_modal_guider_denoising_func,
        simple_denoising_func,
    )
    from ltx_pipelines.utils.samplers import euler_denoising_loop
    from ltx_pipelines.utils.types import PipelineComponents

    transformer = X0Model(ref)
    g = VIDEO_GUIDANCE
    video_params = MultiModalGuiderParams(cfg_scale=g.cfg, stg_scale=g.stg, stg_blocks=list(g.stg_blocks),
                                          rescale_scale=g.rescale, modality_scale=g.modality)
    guided = multi_modal_guider_denoising_func(
        video_guider=MultiModalGuider(params=video_params, negative_context=negative.video),
        audio_guider=MultiModalGuider(params=MultiModalGuiderParams()),
        v_context=positive.video, a_context=positive.audio, transformer=transformer)
    plain = simple_denoising_func(video_context=positive.video, audio_context=positive.audio, transformer=transformer)
    shape = VideoPixelShape(batch=1, frames=FRAMES, width=WIDTH, height=HEIGHT, fps=FPS)
    cpu = torch.device("cpu")
    common = {"output_shape": shape, "conditionings": list(images),
              "noiser": GaussianNoiser(torch.Generator().manual_seed(SEED)), "stepper": EulerDiffusionStep(),
              "components": PipelineComponents(dtype=torch.float32, device=cpu), "dtype": torch.float32,
              "device": cpu, "initial_audio_latent": audio}

    def loop(fn):
        return lambda sigmas, video, audio_state, stepper: euler_denoising_loop(sigmas, video, audio_state, stepper, fn)

    stage_1 = denoise_video_only(sigmas=ltx2_sigmas(3), denoising_loop_fn=loop(guided), **common)
    stage_2_sigmas = sigma_table(STAGE2_SIGMAS)
    stage_2 = denoise_video_only(sigmas=stage_2_sigmas, denoising_loop_fn=loop(plain), noise_scale=stage_2_sigmas[0],
                                 initial_video_latent=stage_1.latent, **common)  # the same noiser: one generator
    return stage_1.latent, stage_2.latent


def _ours(model, positive, negative, audio, images=()):
    held = [*images, audio]
    generator = torch.Generator().manual_seed(SEED)
    negative = uncond_contexts(positive, negative, GuidanceParams(), held=True)  # as sample_request does
    stage_1 = sample(model, positive, negative, empty_latent(WIDTH, HEIGHT, FRAMES, FPS),
                     Stage(ltx2_sigmas(3), "stage 1", video_guidance=VIDEO_GUIDANCE, audio_guidance=GuidanceParams(),
                           conditions=held), generator)
    stage_2 = sample(model, positive, None, stage_1,
                     Stage(sigma_table(STAGE2_SIGMAS), "stage 2", noise_scale=STAGE2_SIGMAS[0], conditions=held),
                     generator)
    return stage_1, stage_2


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_audio_to_video_two_stages_match_the_reference_pipeline(version, one_thread):
    from ltx2_core.conditioning import EncodedAudio

    ours, ref = _models(version)
    positive, negative = _texts(ours.config)
    audio = _encoded_audio()
    got = _ours(ours, positive, negative, EncodedAudio(audio, 1.0))
    want = _reference_a2v(ref, positive, negative, audio)
    for stage, (ours_latent, theirs) in enumerate(zip(got, want), 1):
        # measured max |Δ| stage 1 / 2: 8.1e-6 / 1.4e-6 (2.0), 9.3e-6 / 1.4e-6 (2.3) on values up to 6
        torch.testing.assert_close(ours_latent.video, theirs, **TOL, msg=lambda m, stage=stage: f"stage {stage}: {m}")
        # the audio is held exactly through both stages: a pure copy of the encoded latent
        assert torch.equal(ours_latent.audio, audio)
    # the sound steers the picture: the same run with another sound differs
    other = _ours(ours, positive, negative, EncodedAudio(torch.randn_like(audio), 1.0))
    assert (other[1].video - got[1].video).abs().max() > 1e-3


def test_image_and_audio_to_video_match_the_reference_pipeline(one_thread):
    """A talking portrait: a face at frame 0 and a voice, both held (1.0.0's a2vid takes images beside the audio)."""
    from ltx2_core.conditioning import EncodedAudio

    ours, ref = _models("2.3")
    positive, negative = _texts(ours.config)
    audio = _encoded_audio()
    face = torch.randn(1, 128, 1, HEIGHT // 32, WIDTH // 32, generator=torch.Generator().manual_seed(9))
    images = [EncodedImage(face, 0, 1.0)]
    got = _ours(ours, positive, negative, EncodedAudio(audio, 1.0), images)
    want = _reference_a2v(ref, positive, negative, audio, _reference_items(images))
    for ours_latent, theirs in zip(got, want):
        torch.testing.assert_close(ours_latent.video, theirs, **TOL)
        assert torch.equal(ours_latent.video[:, :, :1], face)  # frame 0 held exactly: a copy
        assert torch.equal(ours_latent.audio, audio)


def test_partial_strength_samples_the_audio_too(one_thread):
    """Strength < 1 lets the model change the sound (denoise mask 1 − strength on every audio token); strength 1
    keeps it; our stage moves the audio only in the first case."""
    from ltx2_core.conditioning import EncodedAudio

    ours, _ = _models("2.0")
    positive, _ = _texts(ours.config)
    audio = _encoded_audio()
    stage = Stage(ltx2_sigmas(2), conditions=[EncodedAudio(audio, 0.5)])
    moved = sample(ours, positive, None, empty_latent(WIDTH, HEIGHT, FRAMES, FPS), stage,
                   torch.Generator().manual_seed(1))
    assert (moved.audio - audio).abs().max() > 1e-3
    assert isinstance(moved, AVLatent)


def test_audio_to_video_for_25_matches_the_120_pipeline(tmp_path, one_thread, monkeypatch):
    """LTX-2.5 vs 1.2.0's `A2VidPipelineTwoStage` (tests/parity/ref120/audio_to_video.py): its frozen audio is also
    fed sigma 0 (`Release.frozen_sigma_zero`), which the 2.5 cross-attention modulation reads."""
    from ltx2_core import TransformerConfig
    from ltx2_core.conditioning import EncodedAudio
    from ltx2_core.demo import demo_transformer
    from ltx2_core.geometry import latent_shape
    from ltx2_core.loader.transformer import load_transformer
    from ltx2_core.types import TextEmbeddings
    from support.reference120 import run_reference
    from support.transformer25 import transformer25_metadata, write_transformer25

    config = TransformerConfig.tiny("2.5")
    path = tmp_path / "transformer-2.5.safetensors"
    write_transformer25(path, demo_transformer(config, seed=2).state_dict(), config,
                        metadata=transformer25_metadata(config, model_version="2.5.0"))
    model = load_transformer(path)
    g = torch.Generator().manual_seed(5)
    positive, negative = (TextEmbeddings(torch.randn(1, 8, config.video.context_dim, generator=g),
                                         torch.randn(1, 8, config.audio.context_dim, generator=g)) for _ in range(2))
    audio = _encoded_audio()
    got = _ours(model, positive, negative, EncodedAudio(audio, 1.0))
    frames, rows, cols = latent_shape(FRAMES, HEIGHT, WIDTH)
    noise = torch.Generator().manual_seed(SEED)  # what our stages drew: per stage the video's, then the audio's
    draws = {}
    for stage in (1, 2):
        draws[f"noise_video_{stage}"] = torch.randn(1, frames * rows * cols, 128, generator=noise)
        draws[f"noise_audio_{stage}"] = torch.randn(1, audio.shape[2], 128, generator=noise)
    tensors = {"positive_video": positive.video, "positive_audio": positive.audio, "negative_video": negative.video,
               "negative_audio": negative.audio, "audio_latent": audio, **draws}
    g = VIDEO_GUIDANCE
    settings = {"path": str(path), "frames": FRAMES, "height": HEIGHT, "width": WIDTH, "fps": FPS, "steps": 3,
                "video_guidance": {"cfg": g.cfg, "stg": g.stg, "stg_blocks": list(g.stg_blocks),
                                   "rescale": g.rescale, "modality": g.modality}}
    want = run_reference("audio_to_video.py", tensors, settings, tmp_path=tmp_path)
    for stage, ours_latent in enumerate(got, 1):  # measured max |Δ| 6.9e-6 (stage 1), 1.3e-6 (stage 2)
        torch.testing.assert_close(ours_latent.video, want[f"stage_{stage}.video"], **TOL)
        assert torch.equal(ours_latent.audio, audio)  # held exactly: a copy
    # the frozen sigma matters here: fed the step's sigma instead, the video differs
    import dataclasses

    from ltx2_core.releases import RELEASES

    releases = dict(RELEASES)
    releases[config.version] = dataclasses.replace(RELEASES[config.version], frozen_sigma_zero=False)
    monkeypatch.setattr("ltx2_core.stages.RELEASES", releases)
    unfrozen = _ours(model, positive, negative, EncodedAudio(audio, 1.0))
    assert (unfrozen[0].video - want["stage_1.video"]).abs().max() > 1e-3
