"""The HDR IC-LoRA pipeline (`ltx2_core.hdr_pipeline`) against ltx-pipelines 1.2.0's `HDRICLoraPipeline` through
its own `__call__` (tests/parity/ref120/hdr.py: its noise, its stage order, its tiles), on the tiny LTX-2.5 release
(tests/support/release25.py: the distilled transformer), fp32, a tiny HDR IC-LoRA (the tiny IC-LoRA's layout plus
`hdr_transform` = logc3 and `reference_downscale_factor` = 2 in its metadata: the released file is not public
here) and a text-embeddings file written from our contexts (the reference's input). The reference fuses the LoRA
with its shipped rule aggregating in fp32 (as test_pipelines120_parity.py's "fp32" runs: the same fusion as ours).

Compared: stage 1's video latent and each stage-2 tile's (stage 2 runs 8 tiles, 2×2×2, clamped to the tiny
latent), and the blended latent handed to the decoder, at TOL (the other pipelines' 1e-4: the same fp32 model
through different op orders); the transformer never sees audio on either side. The decode itself is replaced on both
sides by the same fixed frames (multiples of 1/256, so our (x + 1) / 2 reproduces them exactly), and the linear
output is compared at 1e-6 (the same fp32 LogC3 inverse). Cases: 128×128 aligned; 250×100 (generated at
256×128, the 96×80 reference video fitted inside each stage's size and reflect-padded, the output cropped); high
quality (9 frames from 17 generated). Measured: every latent within 1.7e-6. And the tile layout against ltx-core's
tiles (slices equal, blend masks at 1e-7)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file
from support.model_files import write_lora
from support.reference120 import run_reference
from support.release25 import write_release25

from ltx2_core.hdr import Transfer, hdr_lora_config
from ltx2_core.hdr_pipeline import HDR, generation_size, hdr_linear, sample_hdr
from ltx2_core.media import write_mp4
from ltx2_core.model_files import ModelFiles
from ltx2_core.pipeline import LocalSampler, encode
from ltx2_core.sampling.tiles import AxisTiles, TileLayout, tiles

TOL = {"atol": 1e-4, "rtol": 1e-4}
FPS, SEED, STRENGTH = 24.0, 11, 0.9
CASES = {"aligned": (128, 128, 17, False), "pad_crop": (250, 100, 17, False), "high_quality": (128, 128, 9, True)}
LAYOUTS = [(((2, 1), (2, 2), (2, 2)), (3, 4, 4)), (((2, 8), (2, 6), (2, 6)), (16, 34, 60)),
           (((2, 1), (3, 2), (1, 0)), (5, 9, 7)),
           (((3, 0), (2, 3), (4, 1)), (11, 8, 10)), (((1, 0), (2, 0), (2, 2)), (2, 6, 13))]


class Recorder:
    def __init__(self, sampler: LocalSampler) -> None:
        self.sampler, self.config, self.device, self.model, self.results = (sampler, sampler.config, sampler.device,
                                                                            sampler.model, [])

    def __call__(self, *args, **kwargs):
        result = self.sampler(*args, **kwargs)
        self.results.append(result)
        return result


def _frames(frames: int, width: int, height: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 257, (frames, height, width, 3), generator=generator).float() / 256


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hdr120")
    paths = write_release25(folder / "models")
    lora = write_lora(folder / "models" / "loras" / "hdr-ic-lora.safetensors", seed=6, version="2.5",
                      metadata={"reference_downscale_factor": "2", "hdr_transform": "logc3"})
    generator = torch.Generator().manual_seed(4)
    video = write_mp4(folder / "sdr.mp4", torch.rand(17, 80, 96, 3, generator=generator), FPS)
    files = ModelFiles(checkpoint=str(paths["distilled"]), text_encoder=str(paths["text_encoder"]),
                       upsampler=str(paths["upsampler"]), vae=str(paths["vae"]), audio_vae=str(paths["audio_vae"]),
                       version="2.5", loras=((str(lora), 1.0),), controls=True)
    models = files.load("cpu", torch.float32)
    positive, _ = encode(models.prompt_encoder, "a sunset over the sea, high dynamic range")
    embeddings = folder / "embeddings.safetensors"
    save_file({"video_context": positive.video, "audio_context": positive.audio}, str(embeddings))
    config = hdr_lora_config(lora)
    ours, tensors, cases = {}, {}, {}
    for name, (width, height, frames, high_quality) in CASES.items():
        recorder = Recorder(LocalSampler(models.transformer))
        latent, _ = sample_hdr(recorder, models, HDR(str(video), STRENGTH, high_quality), positive, width, height,
                               frames, FPS, SEED, config)
        gen_w, gen_h = generation_size(width, height)
        fixed = _frames(2 * frames - 1 if high_quality else frames, gen_w, gen_h, seed=len(ours))
        size = None if (gen_w, gen_h) == (width, height) else (width, height)
        ours[name] = (recorder.results, latent, hdr_linear(fixed, config.transfer, size, high_quality))
        tensors[f"{name}.frames"] = fixed
        cases[name] = {"seed": SEED, "height": height, "width": width, "num_frames": frames, "frame_rate": FPS,
                       "high_quality_hdr": high_quality}
    settings = {"files": {k: str(v) for k, v in paths.items()}, "lora": str(lora), "embeddings": str(embeddings),
                "video": str(video), "strength": STRENGTH, "cases": cases, "layouts": LAYOUTS}
    return ours, run_reference("hdr.py", tensors, settings, folder, timeout=1800)


@pytest.mark.parametrize("name", list(CASES))
def test_the_hdr_pipeline_matches_the_reference_call(runs, name):
    ours, ref = runs
    results, latent, linear = ours[name]
    calls = sorted(int(key.split(".")[1][4:]) for key in ref if key.startswith(f"{name}.call") and key.count(".") == 1)
    assert len(results) == len(calls) == 9  # stage 1, then 8 tiles
    for n, result in enumerate(results):
        assert result.audio is None and bool(ref[f"{name}.call{n}.audio_is_none"])  # video only on both sides
        torch.testing.assert_close(result.video, ref[f"{name}.call{n}"], **TOL, msg=f"{name} call {n}")
    torch.testing.assert_close(latent.video, ref[f"{name}.out.video"], **TOL, msg=f"{name}: the blended latent")
    assert bool(ref[f"{name}.out.video.dtype_is_fp32"])  # the reference decodes in fp32, as ours
    width, height, frames, _ = CASES[name]
    assert linear.shape == (frames, height, width, 3)
    torch.testing.assert_close(linear, ref[f"{name}.out.linear"], atol=1e-6, rtol=1e-6)
    assert float(linear.max()) > 1  # highlights above 1: HDR


def test_the_tile_layout_matches_ltx_core(runs):
    _, ref = runs
    for index, (layout, grid) in enumerate(LAYOUTS):
        ours = tiles(TileLayout(*(AxisTiles(*axis) for axis in layout)), grid)
        slices = [[[s.start, s.stop] for s in tile.slices] for tile in ours]
        assert slices == ref[f"layout{index}.slices"].tolist()  # integers: exact
        for k, tile in enumerate(ours):
            torch.testing.assert_close(tile.weights, ref[f"layout{index}.mask{k}"], atol=1e-7, rtol=0)
        total = torch.zeros(grid)
        for tile in ours:
            total[tile.slices] += tile.weights
        torch.testing.assert_close(total, torch.ones(grid), atol=1e-6, rtol=0)  # the weights sum to 1
