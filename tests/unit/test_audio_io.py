"""Reading sound (read_audio, audio_seconds, check_waveform) and writing it alone (write_audio), on real files made
with PyAV: sample-exact PCM clips and every bad input refused with a message naming the fix, before anything is
decoded or written (parity with the reference's decode_audio_from_file: tests/parity/test_audio_io_parity.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import av
import numpy as np
import pytest
import torch

from ltx2_core.audio_io import Waveform, audio_seconds, check_waveform, read_audio
from ltx2_core.conditioning.audio import AudioCondition
from ltx2_core.errors import NonFiniteError
from ltx2_core.media import write_audio, write_mp4

RATE = 8000
LAYOUTS = {1: "mono", 2: "stereo", 6: "5.1"}


def _write(path, samples: np.ndarray, codec: str, fmt: str, rate: int = RATE, muxer: str | None = None):
    """A real file: `samples` (C, S) in `fmt`'s dtype, encoded with `codec` as one frame (PyAV cuts it)."""
    data = samples if fmt.endswith("p") else samples.T.reshape(1, -1)  # packed formats interleave the channels
    layout = LAYOUTS[samples.shape[0]]
    with av.open(str(path), "w", format=muxer) as container:
        stream = container.add_stream(codec, rate=rate, layout=layout)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(data), format=fmt, layout=layout)
        frame.sample_rate, frame.pts = rate, 0
        container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def _ints(channels: int, seconds: float = 1.0, seed: int = 0) -> np.ndarray:
    """(C, S) random 16-bit samples: every bit of every sample counts in an exact comparison."""
    return np.random.default_rng(seed).integers(-32768, 32768, (channels, round(seconds * RATE)), dtype=np.int16)


def _sine(channels: int = 2, seconds: float = 1.0, rate: int = RATE) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return np.stack([0.5 * np.sin(2 * np.pi * (220 + 110 * c) * t) for c in range(channels)]).astype(np.float32)


def _wav(tmp_path, channels: int = 2, seconds: float = 1.0, name: str = "s16.wav"):
    ints = _ints(channels, seconds)
    return _write(tmp_path / name, ints, "pcm_s16le", "s16"), ints


def _m4a(tmp_path, seconds: float = 1.0):
    return _write(tmp_path / "aac.m4a", _sine(2, seconds), "aac", "fltp", muxer="mp4")


def _video(tmp_path, audio: bool):
    frames = torch.zeros(2, 32, 32, 3)
    sound = torch.from_numpy(_sine(2, 1.0, 24000)) if audio else None
    return write_mp4(tmp_path / ("av.mp4" if audio else "silent.mp4"), frames, 2, sound, 24000 if audio else None)


# reading


@pytest.mark.parametrize("channels", [1, 2])
def test_pcm_wav_reads_as_its_samples_over_32768(tmp_path, channels):
    path, ints = _wav(tmp_path, channels)
    sound = read_audio(path)
    assert sound.rate == RATE and sound.samples.dtype == torch.float32
    # int16 / 32768 is exact in float32, and nothing else touches the samples
    assert torch.equal(sound.samples, torch.from_numpy(ints / np.float32(32768)))
    assert audio_seconds(path) == 1.0


@pytest.mark.parametrize(("start", "duration"), [(0.3, 0.25), (0.0, 1.0), (0.0101, 0.5), (0.6, None), (0.9, 0.5)])
def test_a_wav_clip_is_the_sample_slice(tmp_path, start, duration):
    path, ints = _wav(tmp_path)
    first = round(start * RATE)
    last = None if duration is None else first + round(duration * RATE)
    # the same decoded ints, copied: exact equality (a clip past the end is simply shorter)
    expected = torch.from_numpy(ints[:, first:last] / np.float32(32768))
    assert torch.equal(read_audio(path, start, duration).samples, expected)


def test_unsigned_8_bit_is_centred(tmp_path):
    # the reference reads u8 / 128, in [0, 2); a sound is centred on 0, so we subtract 1
    values = np.array([[0, 64, 128, 255]], dtype=np.uint8)
    path = _write(tmp_path / "u8.wav", values, "pcm_u8", "u8")
    assert read_audio(path).samples.tolist() == [[-1.0, -0.5, 0.0, 127 / 128]]


def test_aac_and_a_video_sound_track_are_read_at_their_rate(tmp_path):
    sound = read_audio(_m4a(tmp_path))
    assert sound.rate == RATE and sound.samples.shape[0] == 2 and sound.samples.shape[1] >= RATE
    # lossy, but the same tones, in place: the error in the middle is a few % of the signal (RMS)
    middle = slice(1000, 7000)
    error = sound.samples[:, middle].numpy() - _sine(2)[:, middle]
    assert (np.sqrt((error**2).mean(-1)) < 0.1 * np.sqrt((_sine(2)[:, middle] ** 2).mean(-1))).all()
    track = read_audio(_video(tmp_path, audio=True), 0.25, 0.5)
    assert track.rate == 24000 and tuple(track.samples.shape) == (2, 12000)


@pytest.mark.skipif("libmp3lame" not in av.codecs_available and "mp3" not in av.codecs_available,
                    reason="this PyAV build has no mp3 encoder")
def test_mp3_is_read(tmp_path):
    codec = "libmp3lame" if "libmp3lame" in av.codecs_available else "mp3"
    path = _write(tmp_path / "a.mp3", _sine(2, 1.0, 16000), codec, "fltp", rate=16000)
    sound = read_audio(path, 0.2, 0.5)
    assert sound.rate == 16000 and tuple(sound.samples.shape) == (2, 8000)
    assert math.isclose(audio_seconds(path), 1.0, abs_tol=0.1)


# refusals, each naming the fix


def _refused(path, match: str, **kwargs):
    with pytest.raises(ValueError, match=match):
        read_audio(path, **kwargs)


def test_a_missing_file_or_a_folder_is_refused(tmp_path):
    _refused(tmp_path / "nowhere.wav", "does not exist; check the path")
    _refused(tmp_path, "is a folder; give an audio file")
    _refused("", "must be given as a path"), _refused(None, "must be given as a path")
    with pytest.raises(ValueError, match="does not exist"):
        audio_seconds(tmp_path / "nowhere.wav")


def test_random_bytes_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "noise.wav"
    path.write_bytes(np.random.default_rng(1).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    _refused(path, r"cannot read audio file .*noise\.wav .*damaged.*re-export it, e\.g\. ffmpeg -i noise\.wav")
    with pytest.raises(ValueError, match="cannot read"):
        audio_seconds(path)


@pytest.mark.parametrize("kind", ["m4a", "mp3"])
def test_a_truncated_file_is_refused(tmp_path, kind):
    if kind == "m4a":
        whole = _m4a(tmp_path)  # its index (moov) is at the end: half a file cannot be opened
        keep = whole.stat().st_size // 2
    else:
        if "libmp3lame" not in av.codecs_available:
            pytest.skip("this PyAV build has no mp3 encoder")
        whole = _write(tmp_path / "a.mp3", _sine(2, 1.0, 16000), "libmp3lame", "fltp", rate=16000)
        keep = 200  # less than one frame
    cut = tmp_path / f"cut.{kind}"
    cut.write_bytes(whole.read_bytes()[:keep])
    _refused(cut, rf"cannot read audio file .*cut\.{kind} .*re-export it")


def test_a_video_without_sound_is_refused(tmp_path):
    _refused(_video(tmp_path, audio=False), "has no audio stream; add a sound track or give an audio file")


def test_more_than_two_channels_are_refused_naming_the_downmix(tmp_path):
    path, _ = _wav(tmp_path, channels=6, name="surround.wav")
    _refused(path, r"has 6 audio channels .* 1 \(mono\) or 2 \(stereo\); downmix it first, e\.g\. ffmpeg -i "
                   r"surround\.wav -ac 2")


def test_a_start_past_the_end_says_how_long_the_audio_is(tmp_path):
    path, _ = _wav(tmp_path, seconds=2.0)
    _refused(path, r"lasts 2\.000 s, so a start at 5 s is past its end; give a start below 2\.000 s", start=5.0)
    _refused(_m4a(tmp_path), r"lasts 1\.\d+ s, so a start at 3 s is past its end", start=3.0)


def test_a_file_without_samples_is_refused(tmp_path):
    path = tmp_path / "empty.wav"
    container = av.open(str(path), "w")
    container.add_stream("pcm_s16le", rate=RATE, layout="mono")
    container.start_encoding()  # the header only
    container.close()
    _refused(path, "holds no audio samples; give a file with sound")
    assert audio_seconds(path) == 0


def test_nan_and_infinite_samples_are_refused(tmp_path):
    samples = _sine(1)
    samples[0, 100], samples[0, 200] = np.nan, np.inf
    path = _write(tmp_path / "float.wav", samples, "pcm_f32le", "flt")
    _refused(path, r"has 1 NaN and 1 infinite samples .* re-export it")
    assert read_audio(path, 0.5).samples.isfinite().all()  # a clip without them is fine


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"start": -1.0}, "start must be a finite number of seconds ≥ 0"),
    ({"start": math.nan}, "start must be"), ({"start": math.inf}, "start must be"), ({"start": "1"}, "start must be"),
    ({"start": True}, "start must be"), ({"duration": 0.0}, "duration must be a finite number of seconds > 0"),
    ({"duration": -0.5}, "duration must be"), ({"duration": math.inf}, "duration must be"),
    ({"duration": 1e-6}, "shorter than one sample at 8000 Hz; give a longer duration"),
])
def test_bad_times_are_refused(tmp_path, kwargs, match):
    _refused(_wav(tmp_path)[0], match, **kwargs)


# waveforms in memory


def test_a_waveform_is_checked_and_made_float32_cpu():
    sound = check_waveform(np.zeros(5, dtype=np.float64), np.int64(24000))
    assert tuple(sound.samples.shape) == (1, 5) and sound.samples.dtype == torch.float32
    assert sound.rate == 24000 and type(sound.rate) is int
    stereo = torch.rand(2, 7, dtype=torch.bfloat16)
    assert torch.equal(Waveform(stereo, 48000).checked().samples, stereo.float())
    assert check_waveform([[0.0, 0.5]], RATE).samples.tolist() == [[0.0, 0.5]]


@pytest.mark.parametrize(("samples", "rate", "match"), [
    (torch.zeros(3, 10), RATE, r"1 \(mono\) or 2 \(stereo\) channels, got \(3, 10\); downmix"),
    (torch.zeros(1, 2, 10), RATE, r"for a ComfyUI AUDIO pass waveform\[0\]"),
    (torch.zeros(2, 0), RATE, "has no samples; give a sound at least one sample long"),
    (torch.zeros(2, 10, dtype=torch.int16), RATE, "must be float in .*divide by 32768"),
    (torch.tensor([[0.0, math.nan, math.inf]]), RATE, "has 1 NaN and 1 infinite samples"),
    (torch.zeros(2, 10), 0, "sample rate must be a positive whole number"),
    (torch.zeros(2, 10), 44100.0, "sample rate must be"), (torch.zeros(2, 10), True, "sample rate must be"),
    ("0.1", RATE, "must be a tensor of samples"), (None, RATE, "must be a tensor of samples"),
    (torch.tensor(0.5), RATE, r"got \(\)"),
])
def test_a_bad_waveform_is_refused(samples, rate, match):
    with pytest.raises(ValueError, match=match):
        check_waveform(samples, rate)


def test_the_condition_says_how_long_a_too_short_sound_is(tmp_path):
    path, _ = _wav(tmp_path, seconds=2.0)
    with pytest.raises(ValueError, match=r"lasts 2\.000 s; from 1 s the clip needs 5\.042 s; use a longer sound"):
        AudioCondition(path, start=1.0).check(5.042)
    wave = Waveform(torch.zeros(1, 2 * RATE), RATE)
    with pytest.raises(ValueError, match=r"waveform lasts 2\.000 s; from 1 s the clip needs 5\.042 s"):
        AudioCondition(wave, start=1.0).check(5.042)
    with pytest.raises(ValueError, match="NaN"):
        AudioCondition(Waveform(torch.full((1, RATE), math.nan), RATE)).check(0.5)
    assert AudioCondition(path, start=1.0).check(0.5).samples.shape == (2, RATE // 2)


# writing


@pytest.mark.parametrize("ext", [".wav", ".flac"])
@pytest.mark.parametrize("channels", [1, 2])
def test_pcm_and_flac_read_back_within_16_bit_quantisation(tmp_path, ext, channels):
    audio = torch.rand(channels, 4000, generator=torch.Generator().manual_seed(0)) * 2 - 1
    audio[:, :2] = torch.tensor([1.0, -1.0])  # full scale both ways
    path = write_audio(tmp_path / f"out{ext}", audio, RATE)
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        assert (stream.codec_context.name, stream.channels, stream.rate) == \
            ({".wav": "pcm_s16le", ".flac": "flac"}[ext], 2, RATE)
        assert next(container.decode(stream)).format.name == "s16"
    sound = read_audio(path)
    assert sound.rate == RATE and tuple(sound.samples.shape) == (2, 4000)  # mono as two equal channels
    torch.testing.assert_close(sound.samples, audio.expand(2, -1), rtol=0, atol=1 / 32768)
    assert {p.name for p in tmp_path.iterdir()} == {f"out{ext}"}


@pytest.mark.parametrize("ext", [".m4a", ".mp4"])
def test_aac_audio_alone(tmp_path, ext):
    samples = 24007  # not a whole number of milliseconds: the default movie timescale (1000) would round it
    path = write_audio(tmp_path / f"out{ext}", torch.from_numpy(_sine(1, samples / 24000, 24000)), 24000)
    with av.open(str(path)) as container:
        assert not container.streams.video
        stream = container.streams.audio[0]
        assert (stream.codec_context.name, stream.channels, stream.rate) == ("aac", 2, 24000)
        assert stream.duration * stream.time_base == Fraction(samples, 24000)  # movie timescale = sample rate
    assert {p.name for p in tmp_path.iterdir()} == {f"out{ext}"}


@pytest.mark.parametrize(("name", "audio", "rate", "error", "match"), [
    ("out.ogg", torch.zeros(2, 10), RATE, ValueError, r"end the file name in one of \.wav .*\.flac .*\.m4a"),
    ("out.wav", torch.zeros(3, 10), RATE, ValueError, "1 or 2 channels"),
    ("out.wav", torch.full((2, 10), 1.5), RATE, ValueError, r"lie in \[-1, 1\].*clamp them first"),
    ("out.flac", torch.full((2, 10), math.nan), RATE, NonFiniteError, "nothing was written"),
    ("out.wav", torch.zeros(2, 10), 0, ValueError, "sample_rate must be"),
    ("out.m4a", torch.zeros(2, 10), 8001, ValueError, "one AAC supports"),
    ("no/out.wav", torch.zeros(2, 10), RATE, FileNotFoundError, "create it first"),
])
def test_bad_output_is_refused_before_any_file(tmp_path, name, audio, rate, error, match):
    (tmp_path / "out.wav").write_bytes(b"keep")
    with pytest.raises(error, match=match):
        write_audio(tmp_path / name, audio, rate)
    assert {p.name for p in tmp_path.iterdir()} == {"out.wav"} and (tmp_path / "out.wav").read_bytes() == b"keep"


def test_an_existing_file_is_replaced_whole(tmp_path):
    (tmp_path / "out.wav").write_bytes(b"old")
    path = write_audio(tmp_path / "out.wav", torch.zeros(2, RATE), RATE)
    assert read_audio(path).samples.shape == (2, RATE) and {p.name for p in tmp_path.iterdir()} == {"out.wav"}
