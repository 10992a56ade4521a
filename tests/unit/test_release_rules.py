"""Where ltx-pipelines 1.0.0 (2.0, 2.3) and 1.2.0 (2.5) differ when a stage is sampled (`stages.noised_stream`,
`Release.keyframe_frames`): a keyframe's time span, the noisy start of held and appended tokens, and a frozen clip
noised before it is frozen. End to end against 1.2.0's pipelines: tests/parity/test_pipelines120_parity.py."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.conditioning import EncodedAudio, EncodedImage, EncodedVideo, condition_audio, condition_video
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.releases import RELEASES
from ltx2_core.stages import noised_stream

FPS = 24.0


def _stream(conditions, keyframe_frames=8, own=None):
    own = torch.randn(1, 2 * 4, 128, generator=torch.Generator().manual_seed(1)) if own is None else own
    return own, condition_video(own, video_positions(2, 2, 2, FPS), conditions, FPS, keyframe_frames)


@pytest.mark.parametrize("version, span", [("2.0", 8), ("2.3", 8), ("2.5", 1)])
def test_a_keyframe_spans_the_releases_frames(version, span):
    assert RELEASES[version].keyframe_frames == span
    key = EncodedImage(torch.zeros(1, 128, 1, 2, 2), 8, 1.0)
    _, stream = _stream([key], RELEASES[version].keyframe_frames)
    time = stream.positions[0, 0, stream.tokens:]  # the keyframe's 4 tokens: [start, end) seconds
    torch.testing.assert_close(time, torch.tensor([[8 / FPS, (8 + span) / FPS]]).expand(4, 2))


@pytest.mark.parametrize("version", ["2.3", "2.5"])
def test_held_and_appended_tokens_start_where_the_releases_noiser_starts_them(version):
    """At noise scale s < 1 (a refinement): 1.0.0 noises the held values, 1.2.0 the latent's own (appended: zeros),
    each blended to the clean value by the denoise mask."""
    release = RELEASES[version]
    first = EncodedImage(torch.full((1, 128, 1, 2, 2), 2.0), 0, 0.75)  # mask 0.25 on latent frame 0
    key = EncodedImage(torch.full((1, 128, 1, 2, 2), 3.0), 8, 0.5)  # appended, mask 0.5
    own, stream = _stream([first, key], release.keyframe_frames, own=torch.ones(1, 8, 128))
    noise, s = torch.zeros(1, 12, 128), 0.5
    latent = noised_stream(stream, own, noise, s, release).latent
    held, kept, appended = latent[0, 0, 0], latent[0, 4, 0], latent[0, 8, 0]
    if release.noise_from_latent:  # x = c(1 − m) + m(start(1 − s) + n·s)
        expected = (2.0 * 0.75 + 0.25 * 1.0 * 0.5, 1.0 * 0.5, 3.0 * 0.5 + 0.5 * 0.0)
    else:  # x = n·m·s + c(1 − m·s)
        expected = (2.0 * (1 - 0.125), 1.0 * 0.5, 3.0 * 0.75)
    torch.testing.assert_close(torch.stack([held, kept, appended]), torch.tensor(expected))


@pytest.mark.parametrize("version", ["2.0", "2.5"])
def test_a_frozen_clip_is_noised_first_where_the_release_does(version):
    """Sound for a video / a retake's kept stream (`RetakePipeline`): 1.2.0 noises the video at the stage's scale
    before freezing it (pure noise at scale 1), 1.0.0 holds it clean; the mask is 0 (frozen) either way.
    Audio-to-video's sound is held clean in both."""
    release = RELEASES[version]
    clip = torch.full((1, 128, 2, 2, 2), 2.0)
    own, stream = _stream([EncodedVideo(clip, 1.0)], release.keyframe_frames)
    noise = torch.full((1, 8, 128), -1.0)
    state = noised_stream(stream, own, noise, 1.0, release)
    assert stream.frozen and torch.equal(state.mask, torch.zeros(1, 8, 1))  # the mask: a pure copy of zeros
    torch.testing.assert_close(state.latent, noise if release.frozen_noised else torch.full_like(noise, 2.0))
    sound = EncodedAudio(torch.full((1, 8, 3, 16), 2.0), 1.0)
    audio = condition_audio(torch.zeros(1, 3, 128), audio_positions(3), [sound], FPS)
    held = noised_stream(audio, torch.zeros(1, 3, 128), torch.full((1, 3, 128), -1.0), 1.0, release)
    torch.testing.assert_close(held.latent, torch.full((1, 3, 128), 2.0))
    kept = condition_audio(torch.zeros(1, 3, 128), audio_positions(3), [sound._replace(retake=True)], FPS)
    retaken = noised_stream(kept, torch.zeros(1, 3, 128), torch.full((1, 3, 128), -1.0), 1.0, release)
    torch.testing.assert_close(retaken.latent, torch.full((1, 3, 128), -1.0 if release.frozen_noised else 2.0))


@pytest.mark.parametrize("version, crf", [("2.0", 33), ("2.3", 33), ("2.5", 18)])
def test_an_image_without_a_crf_takes_the_releases(version, crf, monkeypatch):
    """1.2.0 re-compresses a still at the CRF the model was trained against (LTX_2_4_PARAMS: 18 from 2.4 on); an
    image that names its CRF keeps it."""
    import numpy as np

    from ltx2_core.conditioning import images
    from ltx2_core.pipeline import Models, sample_request
    from ltx2_core.request import Request
    from ltx2_core.model.transformer.config import TransformerConfig
    from ltx2_core.types import TextEmbeddings

    seen = []
    monkeypatch.setattr(images, "h264_round_trip", lambda pixels, used: seen.append(used) or pixels)
    picture = np.zeros((64, 64, 3), dtype=np.uint8)
    assert RELEASES[version].image_crf == crf

    class Encoder(torch.nn.Module):  # the shape of the video VAE encoder's output, nothing more
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return torch.zeros(x.shape[0], 128, 1, x.shape[3] // 32, x.shape[4] // 32)

    class Sampler:
        config, device = TransformerConfig.tiny(version), torch.device("cpu")

        def __call__(self, positive, negative, latent, stage, generator, *, progress=None):
            return latent

    text = TextEmbeddings(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    request = Request("a", width=64, height=64, frames=9, images=(images.ImageCondition(picture),
                                                                   images.ImageCondition(picture, 8, crf=5)))
    models = Models(None, None, None, video_encoder=Encoder())
    sample_request(request, models, text, text, sampler=Sampler())
    assert seen == [crf, 5]
