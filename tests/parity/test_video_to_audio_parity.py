"""Sound for a silent video (video to audio) vs each release's reference: `RetakePipeline` with
`regenerate_video=False` on a file without sound. LTX-2.0 and 2.3 against ltx-pipelines 1.0.0 in this Python (the
video held by a zero denoise mask; measured max |Δ| of the audio latent, 3 guided steps / 8 distilled: 2.0 8.6e-6 /
6.0e-7, 2.3 1.2e-5 / 7.2e-7); LTX-2.5 against 1.2.0 (its frozen modality: the stream's sigma fed as 0 too), run in
the reference's own Python (tests/parity/ref120/video_to_audio.py):

* reading: a real mp4 (PyAV, libx264) read and prepared by `video_io.read_video` vs the reference's
  `get_videostream_metadata` + `decode_video_from_file` + `video_preprocess`, at the file's size (what V2A does: a
  pure copy, compared exactly) and at a smaller size (cover-resize and centre crop, ≤ 1e-5);
* denoising: our pipeline's path (`pipeline.sample_request` with an `EncodedVideo` at strength 1) vs the reference's
  `_build_state(ModalitySpec(frozen=True, initial_latent=...))` + the audio from noise + `euler_denoising_loop`,
  both over the same tiny LTX-2.5 transformer file (fp32; the harness builds 1.2.0's model from 2.5 files, as
  tests/parity/test_transformer25_loop_parity.py), guided (LTX2 schedule, 3 steps, the release's guidance for both
  modalities with negative contexts) and distilled (the 8-step table, no guidance). The initial noise is our
  generator's, handed to the reference as tensors; the video latent is random (the encoder's parity is
  tests/parity/test_video_vae_parity.py). Tolerance atol=rtol=1e-4 as the other loops; measured max |Δ| of the
  audio latent (values up to ~4): guided 1.0e-5, distilled 6.6e-7; the frozen video ends at the file's latent.

The frozen video is noised as `RetakePipeline` leaves it (`ModalitySpec(frozen=True)` at the default noise_scale 1:
the transformer sees noise moving toward the video while told it is clean), which 2.5 follows
(`Release.frozen_noised`, docs/references.md); the whole pipeline through 1.2.0's own `__call__`:
tests/parity/test_pipelines120_parity.py.
"""

from __future__ import annotations

import av
import numpy as np
import pytest
import torch
from support.reference120 import run_reference
from support.transformer25 import transformer25_metadata, write_transformer25

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import EncodedVideo, VideoCondition
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_latent_length, latent_shape
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.pipeline import LocalSampler, Models, Request, sample_request
from ltx2_core.sampling import DISTILLED_SIGMAS, ltx2_sigmas, sigma_table
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.types import TextEmbeddings
from ltx2_core.video_io import read_video, video_info

TOL = {"atol": 1e-4, "rtol": 1e-4}
FRAMES, HEIGHT, WIDTH, FPS, TEXT_TOKENS, SEED = 17, 64, 96, 24.0, 8, 13
VERSIONS = ("2.5",)
CASES = tuple(f"{version}-{kind}" for version in VERSIONS for kind in ("guided", "distilled"))


def write_mp4(path, width: int, height: int, frames: int, fps: int = 24, seed: int = 0):
    """A real H.264 mp4 (PyAV): smooth gradients plus noise, so resizing has something to interpolate."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            base = np.stack([(x * 3 + i * 9) % 256, (y * 4 + i * 5) % 256, (x + y + i * 17) % 256], axis=-1)
            image = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    return path


def _guidance(params) -> dict:
    return {"cfg": params.cfg, "stg": params.stg, "stg_blocks": list(params.stg_blocks), "rescale": params.rescale,
                "modality": params.modality}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(ours, reference, files): our tensors and the reference's, by name."""
    folder = tmp_path_factory.mktemp("v2a")
    files = {"own": write_mp4(folder / "own.mp4", 96, 64, 17), "resized": write_mp4(folder / "wide.mp4", 112, 48, 9)}
    ours = {"own.pixels": read_video(files["own"]), "resized.pixels": read_video(files["resized"], 32, 64),
            "own.metadata": torch.tensor(video_info(files["own"])[:4], dtype=torch.float64)}
    settings = {"reads": {"own": {"path": str(files["own"]), "height": None, "width": None},
                          "resized": {"path": str(files["resized"]), "height": 32, "width": 64}}, "cases": {}}
    tensors = {}
    frames, rows, cols = latent_shape(FRAMES, HEIGHT, WIDTH)
    g = torch.Generator().manual_seed(5)
    for version in VERSIONS:
        config = TransformerConfig.tiny(version)
        path = folder / f"transformer-{version}.safetensors"
        metadata = transformer25_metadata(config, model_version="2.5.0" if version == "2.5" else None)
        write_transformer25(path, demo_transformer(config, seed=2).state_dict(), config, metadata=metadata)
        model = load_transformer(path)
        positive, negative = (TextEmbeddings(torch.randn(1, TEXT_TOKENS, config.video.context_dim, generator=g),
                                             torch.randn(1, TEXT_TOKENS, config.audio.context_dim, generator=g))
                              for _ in range(2))
        tensors |= {f"{version}.positive_video": positive.video, f"{version}.positive_audio": positive.audio,
                    f"{version}.negative_video": negative.video, f"{version}.negative_audio": negative.audio}
        models = Models(model, None, None)
        for kind in ("guided", "distilled"):
            name = f"{version}-{kind}"
            latent = torch.randn(1, 128, frames, rows, cols, generator=g)
            request = Request("unused", width=WIDTH, height=HEIGHT, frames=FRAMES, fps=FPS, seed=SEED,
                              steps=3 if kind == "guided" else None, mode="one-stage" if kind == "guided" else
                              "distilled", video_input=VideoCondition("unused.mp4"))
            result, _ = sample_request(request, models, positive, negative if kind == "guided" else None,
                                       sampler=LocalSampler(model), video=EncodedVideo(latent, 1.0))
            ours[f"{name}.video"], ours[f"{name}.audio"] = result.video, result.audio
            noise = torch.Generator().manual_seed(SEED)  # what the stage drew: video, then audio
            tensors |= {f"{name}.noise_video": torch.randn(1, frames * rows * cols, 128, generator=noise),
                        f"{name}.noise_audio": torch.randn(1, audio_latent_length(FRAMES, FPS), 128, generator=noise),
                        f"{name}.video_latent": latent}
            # RetakePipeline as written: the frozen video at the default noise scale 1 (its latent starts as noise)
            settings["cases"][name] = {"path": str(path), "text": version, "frames": FRAMES, "height": HEIGHT,
                                       "width": WIDTH, "fps": FPS, "steps": 3, "distilled": kind == "distilled",
                                       "video_noise_scale": 1.0,
                                       "guidance": [_guidance(p) for p in default_guidance(version, 3)]}
    return ours, run_reference("video_to_audio.py", tensors, settings, tmp_path=folder), tensors


def test_the_file_is_read_as_the_reference_reads_it(runs):
    ours, want, _ = runs
    torch.testing.assert_close(ours["own.metadata"], want["own.metadata"], atol=0, rtol=0)
    assert ours["own.pixels"].shape == want["own.pixels"].shape == (1, 3, 17, 64, 96)
    assert torch.equal(ours["own.pixels"], want["own.pixels"])  # the file's own size: a pure copy, exact
    assert ours["resized.pixels"].shape == want["resized.pixels"].shape == (1, 3, 9, 32, 64)
    # measured max |Δ| 0 (the same interpolation on the same decoded frames)
    torch.testing.assert_close(ours["resized.pixels"], want["resized.pixels"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", CASES)
def test_the_sound_is_sampled_as_the_reference_samples_it(runs, case):
    ours, want, tensors = runs
    assert ours[f"{case}.video"].shape == want[f"{case}.video"].shape
    assert ours[f"{case}.audio"].shape == want[f"{case}.audio"].shape
    # the frozen video's Euler steps end at the encoded latent (the last step's x0), up to rounding
    torch.testing.assert_close(ours[f"{case}.video"], tensors[f"{case}.video_latent"], atol=1e-5, rtol=0)
    torch.testing.assert_close(want[f"{case}.video"], tensors[f"{case}.video_latent"], atol=1e-5, rtol=0)
    sigmas = sigma_table(DISTILLED_SIGMAS) if case.endswith("distilled") else ltx2_sigmas(3)
    torch.testing.assert_close(sigmas, want[f"{case}.sigmas"], atol=1e-6, rtol=0)  # the schedule the stage ran
    print(case, "max |Δ| audio", float((ours[f"{case}.audio"] - want[f"{case}.audio"]).abs().max()))
    torch.testing.assert_close(ours[f"{case}.audio"], want[f"{case}.audio"], **TOL)


def test_the_video_drives_the_sound_and_the_frozen_sigma_matters(runs):
    """Not vacuous: another video latent gives another sound; the sound differs from a run that fed the video
    stream its sigma (the 1.0.0-style held video), so the parity above pins the frozen sigma."""
    ours, _, tensors = runs
    case = "2.5-guided"
    model = demo_transformer(TransformerConfig.tiny("2.5"), seed=2)
    positive = TextEmbeddings(tensors["2.5.positive_video"], tensors["2.5.positive_audio"])
    negative = TextEmbeddings(tensors["2.5.negative_video"], tensors["2.5.negative_audio"])
    request = Request("unused", width=WIDTH, height=HEIGHT, frames=FRAMES, fps=FPS, seed=SEED, steps=3,
                      video_input=VideoCondition("unused.mp4"))
    latent = tensors[f"{case}.video_latent"]
    other, _ = sample_request(request, Models(model, None, None), positive, negative, sampler=LocalSampler(model),
                              video=EncodedVideo(10 * latent.flip(-1), 1.0))
    assert (other.audio - ours[f"{case}.audio"]).abs().max() > 1e-3
    print("another video: max |Δ| audio", float((other.audio - ours[f"{case}.audio"]).abs().max()))
    unfrozen, _ = sample_request(request, Models(model, None, None), positive, negative, sampler=LocalSampler(model),
                                 video=EncodedVideo(latent, 1.0 - 1e-9))
    print("video fed its sigma: max |Δ| audio", float((unfrozen.audio - ours[f"{case}.audio"]).abs().max()))
    assert (unfrozen.audio - ours[f"{case}.audio"]).abs().max() > 1e-3


def test_a_video_held_clean_gives_another_sound(runs):
    """Not vacuous: the noised frozen video matters. Holding it clean (1.0.0's way, which 2.5 no longer takes)
    changes the sound well beyond the tolerance."""
    from ltx2_core.releases import RELEASES

    ours, _, tensors = runs
    case = "2.5-guided"
    model = demo_transformer(TransformerConfig.tiny("2.5"), seed=2)
    positive = TextEmbeddings(tensors["2.5.positive_video"], tensors["2.5.positive_audio"])
    negative = TextEmbeddings(tensors["2.5.negative_video"], tensors["2.5.negative_audio"])
    request = Request("unused", width=WIDTH, height=HEIGHT, frames=FRAMES, fps=FPS, seed=SEED, steps=3,
                      video_input=VideoCondition("unused.mp4"))
    release = RELEASES["2.5"]
    object.__setattr__(release, "frozen_noised", False)  # the record is frozen; restored below
    try:
        clean, _ = sample_request(request, Models(model, None, None), positive, negative,
                                  sampler=LocalSampler(model), video=EncodedVideo(tensors[f"{case}.video_latent"], 1.0))
    finally:
        object.__setattr__(release, "frozen_noised", True)
    gap = float((clean.audio - ours[f"{case}.audio"]).abs().max())
    print("video held clean vs noised: max |Δ| audio", gap)
    assert gap > 1e-2


# LTX-2.0 and 2.3 against their reference, ltx-pipelines 1.0.0 (in this Python): `RetakePipeline(regenerate_video=
# False)` on a file without sound holds the encoded video by `TemporalRegionMask(0, 0)` (denoise mask 0 everywhere,
# the step's sigma fed as it is) and samples the audio from noise; its denoise path is run here on the same tiny
# weights with the same seeded noiser (video noise drawn first, then audio, as ours).


def _reference_retake_100(ref, positive, negative, video_latent, guided: bool, steps: int = 3):
    from support.reference import import_ltx_pipelines

    import_ltx_pipelines()
    from ltx_core.components.diffusion_steps import EulerDiffusionStep
    from ltx_core.components.guiders import MultiModalGuider, MultiModalGuiderParams
    from ltx_core.components.noisers import GaussianNoiser
    from ltx_core.components.schedulers import LTX2Scheduler
    from ltx_core.model.transformer import X0Model
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.retake import TemporalRegionMask
    from ltx_pipelines.utils.constants import DISTILLED_SIGMA_VALUES
    from ltx_pipelines.utils.helpers import (
        multi_modal_guider_denoising_func,
        noise_audio_state,
        noise_video_state,
        simple_denoising_func,
    )
    from ltx_pipelines.utils.samplers import euler_denoising_loop
    from ltx_pipelines.utils.types import PipelineComponents

    transformer = X0Model(ref)
    shape = VideoPixelShape(batch=1, frames=FRAMES_100, width=WIDTH, height=HEIGHT, fps=FPS)
    cpu, components = torch.device("cpu"), PipelineComponents(dtype=torch.float32, device=torch.device("cpu"))
    noiser = GaussianNoiser(torch.Generator().manual_seed(SEED))
    video, video_tools = noise_video_state(shape, noiser, [TemporalRegionMask(0.0, 0.0, FPS)], components,
                                           torch.float32, cpu, initial_latent=video_latent)
    audio, audio_tools = noise_audio_state(shape, noiser, [], components, torch.float32, cpu)
    if guided:
        sigmas = LTX2Scheduler().execute(steps=steps).to(torch.float32)
        params = [MultiModalGuiderParams(cfg_scale=p.cfg, stg_scale=p.stg, stg_blocks=list(p.stg_blocks),
                                         rescale_scale=p.rescale, modality_scale=p.modality) for p in GUIDANCE_100]
        fn = multi_modal_guider_denoising_func(
            MultiModalGuider(params=params[0], negative_context=negative.video),
            MultiModalGuider(params=params[1], negative_context=negative.audio),
            v_context=positive.video, a_context=positive.audio, transformer=transformer)
    else:
        sigmas = torch.tensor(DISTILLED_SIGMA_VALUES, dtype=torch.float32)
        fn = simple_denoising_func(video_context=positive.video, audio_context=positive.audio, transformer=transformer)
    video, audio = euler_denoising_loop(sigmas, video, audio, EulerDiffusionStep(), fn)
    return (video_tools.unpatchify(video_tools.clear_conditioning(video)).latent,
            audio_tools.unpatchify(audio_tools.clear_conditioning(audio)).latent)


FRAMES_100 = 17
GUIDANCE_100 = default_guidance("2.0", 3)  # 2.0's and 2.3's scales are the same; STG on the tiny model's last block


@pytest.mark.parametrize("version", ["2.0", "2.3"])
@pytest.mark.parametrize("guided", [True, False], ids=["guided", "distilled"])
def test_sound_for_a_video_matches_the_100_retake(version, guided, one_thread):
    from parity.test_denoise_parity import _models, _texts

    ours, ref = _models(version)
    positive, negative = _texts(ours.config)
    frames, rows, cols = latent_shape(FRAMES_100, HEIGHT, WIDTH)
    video_latent = torch.randn(1, 128, frames, rows, cols, generator=torch.Generator().manual_seed(21))
    request = Request("unused", width=WIDTH, height=HEIGHT, frames=FRAMES_100, fps=FPS, seed=SEED,
                      steps=3 if guided else None, mode="one-stage" if guided else "distilled",
                      video_input=VideoCondition("unused.mp4"))
    assert default_guidance(version, 3) == GUIDANCE_100
    got, _ = sample_request(request, Models(ours, None, None), positive, negative if guided else None,
                            sampler=LocalSampler(ours), video=EncodedVideo(video_latent, 1.0))
    want_video, want_audio = _reference_retake_100(ref, positive, negative, video_latent, guided)
    assert torch.equal(got.video, video_latent)
    torch.testing.assert_close(want_video, video_latent, atol=1e-6, rtol=0)
    print(version, "guided" if guided else "distilled", "max |Δ| audio", float((got.audio - want_audio).abs().max()))
    torch.testing.assert_close(got.audio, want_audio, **TOL)
