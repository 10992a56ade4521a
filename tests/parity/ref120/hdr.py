"""The reference side of tests/parity/test_hdr_pipeline_parity.py: ltx-pipelines 1.2.0's `HDRICLoraPipeline`
through its own `__call__` on the tiny LTX-2.5 release (the distilled transformer, the test's tiny HDR IC-LoRA, the
text embeddings file the test wrote from our contexts), fp32 (the module's `torch` sees bfloat16 as float32, as
pipelines.py does), no quantization, `tiling_config=None`, the default stage-2 tiles (clamped to the tiny latent);
the LoRA fused by the shipped rule aggregating in fp32 (as pipelines.py's "fp32" fusion: the same fusion as ours).

Each stage call is recorded (stage 1, then stage 2 once per tile, in tile order); the video decoder is replaced by
one that records the latent it is given and returns the test's fixed frames (chunks [f, h, w, c] in [0, 1]), so the
pipeline's `_decode_video` (LogC3 inverse, crop, high-quality frame drop) runs on the same values as ours. Also:
ltx-core's tiles (slices and blend masks of `VideoModalityTilingHelper`, non-causal) for the test's layouts."""


import torch
from exchange import Float32Torch, inputs, outputs
from ltx_core.loader.fuse_loras import FuseRule, _bf16_fuse
from ltx_core.tiling import DimensionTilingConfig, TileCountConfig, create_tiles, identity_mapping_operation
from ltx_core.types import SpatioTemporalScaleFactors
from ltx_pipelines import hdr_ic_lora
from ltx_pipelines.utils.model_paths import ModelPaths

t, settings = inputs()
cpu = torch.device("cpu")
files = settings["files"]



hdr_ic_lora.torch = Float32Torch("torch")


class Recorder:
    """Wraps a stage and records the video it returns, numbering the calls (stage 1, then each tile)."""

    def __init__(self, out, stage):
        self.out, self.stage = out, stage

    def __call__(self, *args, **kwargs):
        video, audio = self.stage(*args, **kwargs)
        calls = sum(key.startswith("call") and "." not in key for key in self.out)
        self.out[f"call{calls}"] = video.latent.clone()
        self.out[f"call{calls}.audio_is_none"] = torch.tensor(audio is None and kwargs.get("audio") is None)
        return video, audio

    def __getattr__(self, name):  # video_scale_factors, ...
        return getattr(self.stage, name)


class FixedDecoder:
    """Records the latent and yields the test's frames for it."""

    def __init__(self, out, name, frames, decoder):
        self.out, self.name, self.frames = out, name, frames
        self.checkpoint_path = decoder.checkpoint_path
        self.diffvae_optimization = decoder.diffvae_optimization

    def __call__(self, latent, *args, **kwargs):
        self.out[self.name] = latent.clone()
        self.out[self.name + ".dtype_is_fp32"] = torch.tensor(kwargs.get("dtype") == torch.float32)
        return iter([self.frames[:5], self.frames[5:]])


out = {}
model_paths = ModelPaths.from_split(transformer_path=files["distilled"], text_encoder_path=files["text_encoder"],
                                    video_vae_path=files["vae"], audio_vae_path=files["audio_vae"])
for name, case in settings["cases"].items():
    pipe = hdr_ic_lora.HDRICLoraPipeline(model_paths, files["upsampler"], settings["lora"], settings["embeddings"],
                                         device=cpu, quantization=None)
    rule = FuseRule(aggregation_dtype=torch.float32, fuse_fn=_bf16_fuse)  # fp32 aggregation, as pipelines.py
    for stage in ("stage_1", "stage_2"):
        setattr(pipe, stage, getattr(pipe, stage).with_builder(getattr(pipe, stage)._transformer_builder
                                                                   .with_fuse_rule(rule)))
    record = {}
    pipe.stage_1 = Recorder(record, pipe.stage_1)
    pipe.stage_2 = Recorder(record, pipe.stage_2)
    pipe.video_decoder = FixedDecoder(record, "out.video", t[f"{name}.frames"], pipe.video_decoder)
    with torch.inference_mode():
        returned = pipe(**case, video_conditioning=[(settings["video"], settings["strength"])], tiling_config=None)
    record["out.linear"] = returned.clone()
    out |= {f"{name}.{key}": value for key, value in record.items()}

for index, (layout, grid) in enumerate(settings["layouts"]):
    tiling = TileCountConfig(*(DimensionTilingConfig(count, overlap) for count, overlap in layout))
    splitters = tiling.to_splitters(SpatioTemporalScaleFactors(8, 32, 32), causal_temporal=False)
    tiles = create_tiles(torch.Size(grid), splitters=list(splitters), mappers=[identity_mapping_operation] * 3)
    out[f"layout{index}.slices"] = torch.tensor([[[s.start, s.stop] for s in tile.in_coords] for tile in tiles])
    for k, tile in enumerate(tiles):
        out[f"layout{index}.mask{k}"] = tile.blend_mask.float().clone()
outputs(out)
