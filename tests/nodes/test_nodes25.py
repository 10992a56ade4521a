"""LTX-2.5 through the nodes, on a tiny release in the released layout (`support.release25`): the model loader of
separate files with either video decoder, the Gemma 4 text encoder loader, the distilled schedule's ancestral
steps, the decode node's seed, and the files a 2.5 model refuses."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.errors import CheckpointError
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model.video_vae.decoder import VideoDecoder
from ltx2_core.sampling import DISTILLED_SIGMAS, sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import sample
from nodes.loaders import LTX2ModelLoader
from support.model_files import write_split_vaes
from support.node_calls import node
from support.release25 import write_release25

SEED = 5


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return {field: str(path) for field, path in write_release25(tmp_path_factory.mktemp("models")).items()}


@pytest.fixture(scope="module")
def loaded(release):
    (model,) = node("LTX2ModelLoader", release["distilled"], release["vae"], release["audio_vae"], "auto", "cpu")
    (encoder,) = node("LTX2TextEncoderLoader", release["text_encoder"], model, "cpu", False)
    conditioning = node("LTX2TextEncode", encoder, "a red car in the rain", "blurry")[0]
    return model, conditioning


def test_the_model_loader_takes_the_separate_files_with_either_video_decoder(release, loaded):
    model, _ = loaded
    assert model.config.version.value == "2.5" and isinstance(model.decoders.video, DiffusionVideoDecoder)
    assert model.video_encoder is not None  # the diffusion VAE file's own encoder: image conditioning works
    (conv,) = node("LTX2ModelLoader", release["dev"], release["conv_vae"], release["audio_vae"], "auto", "cpu")
    assert isinstance(conv.decoders.video, VideoDecoder) and conv.files.label.startswith(release["dev"])


def test_the_distilled_schedule_takes_ltx25s_ancestral_steps(loaded):
    """The sampler node's distilled table on a 2.5 model is the release's stage 1: ancestral steps whose fresh
    noise comes from seed + 10000 (not the deterministic Euler steps of 2.0 / 2.3)."""
    model, conditioning = loaded
    (latent,) = node("LTX2EmptyLatent", 64, 32, 9)
    (sampled,) = node("LTX2Sampler", model, conditioning, latent, SEED, 8, "distilled")
    transformer = model.host.transformer

    def reference(ancestral_seed):
        stage = Stage(sigma_table(DISTILLED_SIGMAS), ancestral_seed=ancestral_seed)
        return sample(transformer, conditioning.positive, conditioning.negative, latent, stage,
                      torch.Generator().manual_seed(SEED))

    ancestral, deterministic = reference(SEED + 10_000), reference(None)
    torch.testing.assert_close(sampled.video, ancestral.video, rtol=0, atol=1e-6)  # one computation, twice
    torch.testing.assert_close(sampled.audio, ancestral.audio, rtol=0, atol=1e-6)
    assert not torch.allclose(sampled.video, deterministic.video, atol=1e-3)


def test_the_decode_nodes_seed_is_the_diffusion_decoders_noise(loaded):
    model, conditioning = loaded
    (latent,) = node("LTX2EmptyLatent", 64, 32, 9)
    (sampled,) = node("LTX2Sampler", model, conditioning, latent, SEED, 8, "distilled")
    first, audio, fps = node("LTX2Decode", model, sampled, 512, 64, seed=1)
    again, _, _ = node("LTX2Decode", model, sampled, 512, 64, seed=1)
    other, _, _ = node("LTX2Decode", model, sampled, 512, 64, seed=2)
    assert first.shape == (9, 32, 64, 3) and audio["waveform"].shape[:2] == (1, 2) and fps == 24.0
    torch.testing.assert_close(first, again, rtol=0, atol=0)  # the same seed draws the same noise: a pure repeat
    assert not torch.allclose(first, other)


def test_a_file_of_the_wrong_kind_is_refused_before_loading(release):
    assert LTX2ModelLoader.VALIDATE_INPUTS(transformer=release["dev"]) is True  # the VAEs: checked when it runs
    with pytest.raises(CheckpointError, match=r"this is an LTX-2.5 audio VAE, .*an LTX-2 video VAE here \(video_vae\)"):
        node("LTX2ModelLoader", release["dev"], release["audio_vae"], release["audio_vae"], "auto", "cpu")
    problem = LTX2ModelLoader.VALIDATE_INPUTS(transformer=release["text_encoder"])
    assert "is a text encoder file, not a transformer: put it in models/text_encoders" in problem
    with pytest.raises(CheckpointError, match=r"this is an LTX-2.5 video VAE .*an LTX-2 audio VAE here \(audio_vae\)"):
        node("LTX2ModelLoader", release["dev"], release["vae"], release["conv_vae"], "auto", "cpu")


def test_vae_files_saved_out_of_a_23_bundle_are_refused_for_a_25_transformer(release, tiny_checkpoints,
                                                                            tmp_path, no_model_work):
    """Their headers name no release; their form is LTX-2.3's (the video VAE's resampling blocks), so the loader
    refuses them with the 2.5 transformer before anything loads."""
    video, audio = write_split_vaes(tiny_checkpoints["2.3"], tmp_path)
    with pytest.raises(CheckpointError, match=r"different LTX-2 releases \(transformer ltx-2.5-22b-dev-transformer-"
                                              r"bf16.safetensors: an LTX-2.5 transformer; video_vae .*: an LTX-2.3 "
                                              r"video VAE"):
        node("LTX2ModelLoader", release["dev"], str(video), str(audio), "auto", "cpu")


def test_a_gemma3_text_encoder_is_refused_for_a_25_model(loaded, gemma_files):
    model, _ = loaded
    with pytest.raises(CheckpointError, match="is Gemma 3 .*Pick the text encoder of the same release"):
        node("LTX2TextEncoderLoader", str(gemma_files[0]), model, "cpu", False)


def test_on_two_workers_ltx25_samples_what_it_samples_here(release, loaded):
    """LTX-2.5's separate files loaded by the workers (gloo, CPU): a guided stage split over CFG-parallel ranks and
    the ancestral distilled stage equal the in-process model's."""
    here, conditioning = loaded
    (layout,) = node("LTX2ParallelConfig", '{"cfg": 2, "sp": 1, "tp": 1}', 4)
    (workers,) = node("LTX2ModelLoader", release["distilled"], release["vae"], release["audio_vae"], "auto", "cpu",
                      parallel=layout, unique_id="workers-25")
    try:
        assert workers.host.transformer is None and workers.config.version.value == "2.5"
        (latent,) = node("LTX2EmptyLatent", 64, 32, 9)
        for schedule, guided in (("ltx2", True), ("distilled", False)):
            results = []
            for model in (here, workers):
                guidance = node("LTX2Guidance", model, cfg=3.0, stg=1.0, rescale=0.7, modality=3.0,
                                stg_blocks="auto", audio_cfg=7.0, audio_stg=1.0, audio_rescale=0.7,
                                audio_modality=3.0, audio_stg_blocks="auto")[0] if guided else None
                results.append(node("LTX2Sampler", model, conditioning, latent, SEED, 2, schedule,
                                    guidance=guidance)[0])
            torch.testing.assert_close(results[1].video, results[0].video, atol=1e-4, rtol=0)
            torch.testing.assert_close(results[1].audio, results[0].audio, atol=1e-4, rtol=0)
    finally:
        workers.release()


def test_a_refinement_after_a_guided_stage_keeps_its_audio(release, loaded):
    """LTX-2.5's two-stage pipeline returns stage 1's sound (ltx-pipelines 1.2.0, `sampling.recipe`): the stage-2
    refine sampler after a guided stage 1 returns the audio it was given, copied exactly (its video is refined);
    after a distilled (unguided) stage 1 it returns the audio it refined, as 1.2.0's distilled pipeline."""
    model, conditioning = loaded
    (upsampler,) = node("LTX2UpsamplerLoader", release["upsampler"], model)
    scales = dict(cfg=3.0, stg=1.0, rescale=0.7, modality=3.0, stg_blocks="auto")
    (guidance,) = node("LTX2Guidance", model, **scales, **{f"audio_{k}": v for k, v in scales.items()})
    (empty,) = node("LTX2EmptyLatent", 64, 64, 9)
    for schedule, extra, keeps in (("ltx2", {"guidance": guidance}, True), ("distilled", {}, False)):
        (first,) = node("LTX2Sampler", model, conditioning, empty, SEED, 2, schedule, **extra)
        assert first["ltx2_guided"] is keeps
        (upsampled,) = node("LTX2LatentUpsample", model, upsampler, first)
        (refined,) = node("LTX2Sampler", model, conditioning, upsampled, SEED, 3, "stage-2 refine")
        assert torch.equal(refined.audio, first.audio) is keeps  # a copy where kept
        assert not torch.allclose(refined.video, upsampled.video, atol=1e-3)  # the video is refined either way
        assert refined["ltx2_guided"] is keeps
