"""The HDR IC-LoRA pipeline on the tiny demo models (`ltx2_core.hdr_pipeline`, `Request(mode="hdr")`): the
video-only stages (the transformer never gets audio, no audio noise is drawn, no audio decoder runs), the tiled
stage 2 (8 tiles, each from its own seed), the fp32 decode to linear light cropped to the size asked for, the
preview and the EXR + mp4 output; and every refusal naming its fix before model work. Its parity with the reference
is tests/parity/test_hdr_pipeline_parity.py."""

from __future__ import annotations

import pytest
import torch
from support.model_files import write_lora

from ltx2_core import stages
from ltx2_core.demo import demo_models
from ltx2_core.hdr import HDR, srgb_preview
from ltx2_core.hdr_pipeline import HdrGeneration, generate_hdr
from ltx2_core.loader.lora import load_lora
from ltx2_core.media import write_mp4
from ltx2_core.pipeline import LocalSampler, generate
from ltx2_core.request import Request
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.stage import Stage
from ltx2_core.conditioning.audio import EncodedAudio


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hdr")
    models = demo_models("2.5")
    hdr_lora = write_lora(folder / "hdr.safetensors", seed=2, version="2.5",
                          metadata={"hdr_transform": "logc3", "reference_downscale_factor": "1"})
    plain = write_lora(folder / "plain.safetensors", seed=3, version="2.5")
    video = write_mp4(folder / "sdr.mp4", torch.rand(9, 64, 96, 3, generator=torch.Generator().manual_seed(1)), 24)
    return models._replace(ic_loras=((load_lora(hdr_lora), 1.0),)), models._replace(
        ic_loras=((load_lora(plain), 1.0),)), str(video)


class Recorder:
    def __init__(self, sampler):
        self.sampler, self.config, self.device, self.model, self.calls = (sampler, sampler.config, sampler.device,
                                                                          sampler.model, [])

    def __call__(self, positive, negative, latent, stage, generator, **kwargs):
        self.calls.append((latent, stage, generator.initial_seed()))
        return self.sampler(positive, negative, latent, stage, generator, **kwargs)


def test_an_hdr_request_runs_video_only_and_returns_linear_light(setup, tmp_path, monkeypatch):
    models, _, video = setup
    audio_forwards = []
    forward = type(models.transformer).forward
    monkeypatch.setattr(type(models.transformer), "forward", lambda self, v, a, *args, **kw: (
        audio_forwards.append(a is not None), forward(self, v, a, *args, **kw))[1])
    monkeypatch.setattr(models.decoders.audio, "forward", lambda *a, **k: pytest.fail("the audio decoder ran"))
    recorder = Recorder(LocalSampler(models.transformer))
    request = Request("a sunset", mode="hdr", width=100, height=70, frames=9, seed=5, hdr=HDR(video, 0.8))
    result = generate(request, models, sampler=recorder)
    assert isinstance(result, HdrGeneration) and result.fps == 24.0
    assert result.linear.shape == (9, 70, 100, 3) and result.linear.dtype == torch.float32  # cropped from 128x128
    assert float(result.linear.min()) >= 0 and audio_forwards and not any(audio_forwards)
    first, *tiles = recorder.calls
    assert first[0].video.shape[3:] == (2, 2) and first[0].audio is None  # half of 128x128
    assert len(tiles) == 8 and [seed for *_, seed in tiles] == list(range(5, 13))  # seed + tile index
    assert all(latent.audio is None and stage.loras == () for latent, stage, _ in tiles)  # fused once, around all
    assert torch.equal(result.preview(), srgb_preview(result.linear))
    paths = result.save(tmp_path / "out")
    assert [p.name for p in paths[:2]] == ["frame_00000.exr", "frame_00001.exr"] and paths[-1].name == "preview.mp4"
    assert len(paths) == 10


def test_high_quality_keeps_every_other_of_twice_the_frames(setup):
    models, _, video = setup
    recorder = Recorder(LocalSampler(models.transformer))
    request = Request("a sunset", mode="hdr", width=64, height=64, frames=9, hdr=HDR(video, 1.0, True))
    result = generate_hdr(request, models, sampler=recorder)
    with pytest.raises(ValueError, match="call pipeline.generate"):
        generate_hdr(request, models)
    assert recorder.calls[0][0].video.shape[2] == 3 and result.linear.shape == (9, 64, 64, 3)  # 17 generated


@pytest.mark.parametrize("changes, message", [
    ({"width": 40}, "at least 64x64 pixels"),
    ({"frames": 10}, "frames must be 8k\\+1"),
    ({"steps": 4}, "leave steps unset"),
    ({"hdr": None}, "mode hdr needs its SDR video"),
    ({"frames": 17}, "has 9 frames and the clip needs 17"),
    ({"hdr": "strength"}, "strength must be in \\[0, 1\\]"),
])
def test_bad_hdr_requests_are_refused_naming_the_fix(setup, changes, message):
    models, _, video = setup
    fields = {"prompt": "p", "mode": "hdr", "width": 64, "height": 64, "frames": 9, "hdr": HDR(video)} | changes
    if fields["hdr"] == "strength":
        fields["hdr"] = HDR(video, 1.5)
    with pytest.raises(ValueError, match=message):
        generate(Request(**fields), models, sampler=lambda *a, **k: pytest.fail("sampled"))


def test_the_models_are_checked(setup):
    models, plain, video = setup
    request = Request("p", mode="hdr", width=64, height=64, frames=9, hdr=HDR(video))
    with pytest.raises(ValueError, match="its metadata states hdr_transform.*load the HDR IC-LoRA"):
        generate_hdr(request, plain)
    with pytest.raises(ValueError, match="x2 spatial latent upsampler"):
        generate_hdr(request, models._replace(upsampler=None))
    with pytest.raises(ValueError, match="video VAE encoder"):
        generate_hdr(request, models._replace(video_encoder=None))


def test_a_video_only_latent_refuses_what_it_cannot_hold(setup):
    models, _, _ = setup
    latent = stages.empty_video_latent(64, 64, 9, 24.0)
    assert latent.audio is None and latent.video.shape == (1, 128, 2, 2, 2)
    sound = EncodedAudio(torch.zeros(1, 8, 10, 16), 1.0)
    with pytest.raises(ValueError, match="a condition of the audio stream was given for a video-only latent"):
        stages.sample(models.transformer, None, None, latent, Stage(ltx2_sigmas(2), conditions=(sound,)),
                      torch.Generator())
    generation = stages.decode(latent, models.decoders, None)
    assert generation.frames.shape == (9, 64, 64, 3) and generation.waveform.numel() == 0


def test_decoding_runs_in_fp32_and_puts_the_decoders_dtypes_back(setup, monkeypatch):
    import ltx2_core.hdr_pipeline as hdr_pipeline
    from ltx2_core.hdr import Transfer

    models, _, _ = setup
    decoder = models.decoders.video
    before = {name: t.dtype for name, t in decoder.state_dict(keep_vars=True).items()}
    first = next(t for t in decoder.parameters() if t.is_floating_point())
    first.data = first.data.to(torch.bfloat16)  # a mixed-dtype decoder
    seen = []

    def fake_decode(latent, module, tiling, generator=None, output_device=None):
        seen.append((latent.dtype, {t.dtype for t in module.parameters()}))
        return torch.zeros(1, 3, 9, 64, 64)

    monkeypatch.setattr(hdr_pipeline, "decode_video", fake_decode)
    latent = stages.empty_video_latent(64, 64, 9, 24.0)
    linear = hdr_pipeline.decode_hdr(latent._replace(video=latent.video.half()), models.decoders, Transfer.LOGC3,
                                     (60, 50), False)
    assert seen == [(torch.float32, {torch.float32})] and linear.shape == (9, 50, 60, 3)
    assert first.dtype == torch.bfloat16  # put back in its own dtype
    first.data = first.data.float()
    assert {name: t.dtype for name, t in decoder.state_dict(keep_vars=True).items()} == before
