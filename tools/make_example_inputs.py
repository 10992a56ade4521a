"""Writes the sounds, the portrait and the videos the examples load (example_workflows/input), synthesised here
(numpy, PIL; written with PyAV), so the pack ships no recorded or copyrighted media, and the tiny IC-LoRA the
control example is tested with (example_workflows/loras). The same files every run.

    python tools/make_example_inputs.py [FOLDER]     # default: example_workflows/input (the LoRA: FOLDER/../loras)

* ltx2_example_voice.wav: 5.2 s of a voice-like babble, mono 16 kHz: a glottal pulse train gliding in pitch,
  shaped by the formants of a sequence of vowels, in syllables of about a fifth of a second with consonant hisses
  and pauses between words.
* ltx2_example_song.flac: 5.2 s of a song-like clip, stereo 32 kHz: a 120 BPM beat (kick, snare, hi-hat), a bass
  line and a I-V-vi-IV chord pad, panned apart.
* ltx2_example_portrait.png: a face looking at the camera, 384x256, for the talking-portrait example.
* ltx2_example_depth.mp4: a depth-map-like control video (near is bright), 384x256, 121 frames at 24 fps, no sound:
  a ball rolling across a floor in front of a wall, for the IC-LoRA control example.
* ltx2_example_retake.mp4: the portrait drifting slowly, 384x256, 49 frames at 24 fps (8k+1, about 2 s), with the
  voice as AAC, for the retake example.
* ../loras/ltx2_example_tiny_ic_lora.safetensors: a random LoRA for the tiny demo transformer of LTX-2.3
  (`ltx2_core.demo`, the model the tests run) in ComfyUI's layout, stating reference_downscale_factor 2 in its
  metadata as a released IC-LoRA does; the end-to-end tests put it in ComfyUI's models/loras. Useless with a real
  model: the example names a released IC-LoRA.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "example_workflows" / "input"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # ltx2_core, for the tiny IC-LoRA
SECONDS = 5.2
# vowel -> formant frequencies (Hz) and bandwidths (Hz), an adult voice's
VOWELS = {"a": ((730, 1090, 2440), (90, 110, 170)), "e": ((530, 1840, 2480), (60, 100, 140)),
          "i": ((270, 2290, 3010), (50, 90, 150)), "o": ((570, 840, 2410), (70, 80, 160)),
          "u": ((300, 870, 2240), (50, 80, 140))}



@contextlib.contextmanager
def _atomic(path: Path):
    """A temporary file beside `path` to write to; it becomes `path` (readable by all) only when the block ends
    without an error, and is removed otherwise: nothing half-written is left behind."""
    handle, temporary = tempfile.mkstemp(suffix=path.suffix, dir=path.parent)
    os.close(handle)
    try:
        yield temporary
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)

def voice(rate: int = 16000, seconds: float = SECONDS, seed: int = 24) -> np.ndarray:
    """(1, S) float32 in [-1, 1]: vowels by additive synthesis (each harmonic of the pitch weighted by the formant
    resonances at its frequency), one per syllable, with noise bursts for consonants and silence between words."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * rate)) / rate
    # syllables of 0.16..0.26 s, words of 2..4 syllables, 0.15 s pauses
    bounds, vowels, now = [], [], 0.08
    while now < seconds - 0.3:
        for _ in range(rng.integers(2, 5)):
            length = rng.uniform(0.16, 0.26)
            bounds.append((now, now + length))
            vowels.append(rng.choice(list(VOWELS)))
            now += length
        now += 0.15
    pitch = 140 + 25 * np.sin(2 * np.pi * 0.4 * t) - 12 * t / seconds  # intonation, falling slowly
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    out = np.zeros_like(t)
    for (begin, end), vowel in zip(bounds, vowels):
        inside = (t >= begin) & (t < end)
        local = t[inside] - begin
        envelope = np.sin(np.pi * local / (end - begin)) ** 0.6  # the syllable's rise and fall
        formants, widths = VOWELS[vowel]
        sound = np.zeros_like(local)
        for k in range(1, int(3800 / 140)):
            frequency = k * pitch[inside]
            gain = sum(1 / np.sqrt(1 + ((frequency - f) / (w / 2)) ** 2) for f, w in zip(formants, widths))
            sound += gain / k * np.sin(k * phase[inside])
        out[inside] += envelope * sound
        onset = inside & (t < begin + 0.04)  # a consonant's hiss at the onset
        out[onset] += 0.15 * rng.standard_normal(int(onset.sum())) * np.linspace(1, 0, int(onset.sum()))
    return (0.8 * out / np.abs(out).max())[None].astype(np.float32)


def _note(frequency: float, t: np.ndarray) -> np.ndarray:
    """A soft saw-like tone: a few harmonics falling off."""
    return sum(np.sin(2 * np.pi * k * frequency * t) / k ** 1.5 for k in range(1, 6))


def song(rate: int = 32000, seconds: float = SECONDS, seed: int = 7, bpm: float = 120.0) -> np.ndarray:
    """(2, S) float32 in [-1, 1]: drums on the beat, a bass on the roots and chords changing each bar."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * rate)) / rate
    beat = 60 / bpm
    chords = [(261.63, 329.63, 392.00), (196.00, 246.94, 293.66), (220.00, 261.63, 329.63), (174.61, 220.00, 261.63)]
    pad, bass = np.zeros_like(t), np.zeros_like(t)
    for bar in range(int(seconds / (4 * beat)) + 1):
        inside = (t >= bar * 4 * beat) & (t < (bar + 1) * 4 * beat)
        local = t[inside] - bar * 4 * beat
        notes = chords[bar % len(chords)]
        pad[inside] = sum(_note(f, t[inside]) for f in notes) * np.minimum(local / 0.05, 1)
        bass[inside] = np.sin(2 * np.pi * notes[0] / 2 * t[inside]) * np.exp(-(local % beat) * 3)
    drums = np.zeros_like(t)
    for index in range(int(seconds / beat * 2) + 1):  # eighth notes
        start = index * beat / 2
        hit = (t >= start) & (t < start + 0.25)
        local = t[hit] - start
        if index % 4 == 0:  # kick on beats 1 and 3: a falling sine
            drums[hit] += np.sin(2 * np.pi * (50 + 100 * np.exp(-local * 30)) * local) * np.exp(-local * 12)
        elif index % 4 == 2:  # snare on 2 and 4
            drums[hit] += 0.5 * rng.standard_normal(int(hit.sum())) * np.exp(-local * 20)
        drums[hit] += 0.12 * rng.standard_normal(int(hit.sum())) * np.exp(-local * 80)  # hi-hat on every eighth
    left = 0.5 * drums + 0.35 * bass + 0.12 * pad
    right = 0.5 * drums + 0.25 * bass + 0.18 * pad
    stereo = np.stack([left, right])
    return (0.8 * stereo / np.abs(stereo).max()).astype(np.float32)


def portrait(width: int = 384, height: int = 256):
    """A PIL image of a face looking at the camera: hair, eyes, nose, a closed mouth, shoulders; plain backdrop."""
    from PIL import Image, ImageDraw

    rows = np.linspace(0, 1, height)[:, None, None]
    backdrop = (np.array([70, 90, 120]) * (1 - rows) + np.array([40, 50, 70]) * rows) * np.ones((1, width, 1))
    image = Image.fromarray(backdrop.astype(np.uint8))
    draw = ImageDraw.Draw(image)
    cx = width // 2
    skin, hair, shirt = (224, 178, 148), (60, 40, 30), (40, 90, 140)
    draw.ellipse((cx - 120, 200, cx + 120, 330), fill=shirt)  # shoulders
    draw.rectangle((cx - 22, 160, cx + 22, 215), fill=(205, 160, 132))  # neck
    draw.ellipse((cx - 64, 24, cx + 64, 150), fill=hair)  # hair, behind the face
    draw.ellipse((cx - 55, 40, cx + 55, 185), fill=skin)  # face
    draw.ellipse((cx - 64, 95, cx - 48, 125), fill=skin)  # ears
    draw.ellipse((cx + 48, 95, cx + 64, 125), fill=skin)
    draw.chord((cx - 56, 34, cx + 56, 96), 180, 360, fill=hair)  # fringe
    for side in (-1, 1):
        x = cx + side * 22
        draw.ellipse((x - 11, 98, x + 11, 110), fill=(250, 250, 250))  # eye whites
        draw.ellipse((x - 5, 99, x + 5, 109), fill=(70, 50, 35))  # irises
        draw.line((x - 12, 90, x + 10, 88) if side < 0 else (x - 10, 88, x + 12, 90), fill=hair, width=3)  # brows
    draw.line((cx, 108, cx - 5, 135, cx + 3, 137), fill=(190, 140, 115), width=2)  # nose
    draw.chord((cx - 18, 148, cx + 18, 164), 0, 180, fill=(170, 80, 80))  # lips
    draw.line((cx - 18, 155, cx + 18, 155), fill=(120, 50, 50), width=1)
    return image


VIDEO_SIZE, FPS = (384, 256), 24
DEPTH_FRAMES, RETAKE_FRAMES = 121, 49
IC_LORA = "ltx2_example_tiny_ic_lora.safetensors"


def depth_frames(frames: int = DEPTH_FRAMES, width: int = VIDEO_SIZE[0], height: int = VIDEO_SIZE[1]) -> np.ndarray:
    """(frames, height, width, 3) uint8 gray: a floor rising toward the camera (brighter nearer), a far wall, and a
    shaded ball rolling from left to right while nearing the camera."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    horizon = 0.45 * height
    scene = np.where(y < horizon, 40.0, 40 + 180 * (y - horizon) / (height - horizon))  # wall, then floor
    out = np.empty((frames, height, width), np.float64)
    for i in range(frames):
        t = i / max(frames - 1, 1)
        radius = 28 + 22 * t
        cx, cy = 0.15 * width + 0.7 * width * t, horizon + 0.35 * (height - horizon) * t + 10
        distance = np.sqrt((x - cx) ** 2 + (y - cy) ** 2) / radius
        ball = np.clip(1 - distance ** 2, 0, None) ** 0.5  # a sphere's height above its outline
        out[i] = np.where(distance < 1, 150 + 105 * ball * (0.6 + 0.4 * t), scene)
    return np.repeat(np.round(out).clip(0, 255).astype(np.uint8)[..., None], 3, axis=-1)


def retake_frames(frames: int = RETAKE_FRAMES) -> np.ndarray:
    """(frames, 256, 384, 3) uint8: the portrait, zoomed in a little and drifting to the right and back."""
    picture = np.asarray(portrait(), dtype=np.float64)
    height, width = picture.shape[:2]
    zoom = 1.1
    big = np.asarray(portrait(round(width * zoom), round(height * zoom)), dtype=np.float64)
    spare = big.shape[1] - width
    out = np.empty((frames, height, width, 3), np.uint8)
    for i in range(frames):
        left = round(spare / 2 * (1 - np.cos(2 * np.pi * i / max(frames - 1, 1))))
        top = (big.shape[0] - height) // 2
        out[i] = big[top:top + height, left:left + width].astype(np.uint8)
    return out


def write_video(path: Path, frames: np.ndarray, fps: int = FPS, sound: np.ndarray | None = None,
                rate: int = 16000) -> None:
    """(F, H, W, 3) uint8 as H.264 (yuv420p) at `fps`, with `sound` ((C, S) float in [-1, 1]) as AAC at `rate`;
    written atomically."""
    import av

    with _atomic(path) as temporary:
        with av.open(temporary, "w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=fps, options={"crf": "23", "preset": "medium"})
            stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
            stream.codec_context.thread_count = 1  # the same bytes every run
            audio = None
            if sound is not None:
                audio = container.add_stream("aac", rate=rate, layout={1: "mono", 2: "stereo"}[sound.shape[0]])
            for image in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
            if audio is not None:
                frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(sound.astype(np.float32)), format="fltp",
                                                   layout=audio.layout.name)
                frame.sample_rate, frame.pts = rate, 0
                for packet in audio.encode(frame):
                    container.mux(packet)
                for packet in audio.encode(None):
                    container.mux(packet)


def write_ic_lora(path: Path, downscale: int = 2, seed: int = 25) -> None:
    """A random LoRA on every block linear of the tiny LTX-2.3 demo transformer, in ComfyUI's layout
    (`diffusion_model.` + lora_A / lora_B), stating `reference_downscale_factor` in its metadata; atomically."""
    from safetensors.torch import save_file

    from ltx2_core import TransformerConfig
    from ltx2_core.demo import demo_transformer
    from ltx2_core.demo.transformer import demo_lora

    lora = demo_lora(demo_transformer(TransformerConfig.tiny("2.3")), seed=seed, name="tiny IC-LoRA")
    tensors = {}
    for target, pair in lora.pairs.items():
        stem = "diffusion_model." + target[: -len(".weight")]
        tensors[stem + ".lora_A.weight"], tensors[stem + ".lora_B.weight"] = pair.down, pair.up
    with _atomic(path) as temporary:
        save_file(tensors, temporary, metadata={"reference_downscale_factor": str(downscale)})


def write_audio(path: Path, samples: np.ndarray, rate: int) -> None:
    """(C, S) float in [-1, 1] as 16-bit PCM (.wav) or FLAC (.flac), mono or stereo; written atomically."""
    import av

    codec = {".wav": "pcm_s16le", ".flac": "flac"}[path.suffix]
    pcm = np.round(np.clip(samples, -1, 1) * 32767).astype(np.int16)
    layout = {1: "mono", 2: "stereo"}[pcm.shape[0]]
    with _atomic(path) as temporary:
        with av.open(temporary, "w") as container:
            stream = container.add_stream(codec, rate=rate, layout=layout)
            stream.format = "s16"
            for start in range(0, pcm.shape[1], 4096):
                frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm[:, start:start + 4096].T.reshape(1, -1)),
                                                   format="s16", layout=layout)
                frame.sample_rate, frame.pts = rate, start
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)


def main(folder: Path = FOLDER) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    write_audio(folder / "ltx2_example_voice.wav", voice(), 16000)
    write_audio(folder / "ltx2_example_song.flac", song(), 32000)
    with _atomic(folder / "ltx2_example_portrait.png") as temporary:
        portrait().save(temporary, format="PNG", optimize=True)
    write_video(folder / "ltx2_example_depth.mp4", depth_frames())
    write_video(folder / "ltx2_example_retake.mp4", retake_frames(), sound=voice(seconds=RETAKE_FRAMES / FPS + 0.1))
    loras = folder.parent / "loras"
    loras.mkdir(exist_ok=True)
    write_ic_lora(loras / IC_LORA)
    return [folder / name for name in ("ltx2_example_voice.wav", "ltx2_example_song.flac", "ltx2_example_portrait.png",
                                       "ltx2_example_depth.mp4", "ltx2_example_retake.mp4")] + [loras / IC_LORA]


if __name__ == "__main__":
    for written in main(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER):
        print(written, f"{written.stat().st_size // 1000} kB")
