"""Reading a sound vs the reference's `decode_audio_from_file` (ltx_pipelines 1.0.0 media_io; 1.2.0's is the same
code): the same samples at the same rate from a start for a duration, on real files made with PyAV."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.audio_io import read_audio
from unit.test_audio_io import _m4a, _wav


def _reference_decode(path, start, duration):
    from support.reference import import_ltx_pipelines

    import_ltx_pipelines()  # stands in for torchaudio, which media_io does not use
    from ltx_pipelines.utils.media_io import decode_audio_from_file

    audio = decode_audio_from_file(str(path), torch.device("cpu"), start, duration)
    return audio.waveform[0], audio.sampling_rate


@pytest.mark.parametrize("duration", [0.25, 0.5, None])
@pytest.mark.parametrize("kind", ["wav", "m4a"])
def test_matches_the_reference_decoder(tmp_path, kind, duration):
    path = _wav(tmp_path)[0] if kind == "wav" else _m4a(tmp_path)
    expected, rate = _reference_decode(path, 0.3, duration)
    sound = read_audio(path, 0.3, duration)
    assert sound.rate == rate and sound.samples.shape == expected.shape
    if kind == "wav":
        assert torch.equal(sound.samples, expected)  # the same ints over the same scale
    else:
        torch.testing.assert_close(sound.samples, expected, rtol=0, atol=1e-6)
