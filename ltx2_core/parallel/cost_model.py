"""The end-to-end time of a two-stage run on N GPUs for each cfg × sp × tp layout, predicted from measured one-GPU
forward times, the collective bytes of each layout and the link between the GPUs (pure arithmetic, no devices).

A block's time on one rank is read off the measured curve (hardware.MEASURED: seconds per block at 1,536 / 6,144 /
15,360 video tokens) at the rank's FLOPs: linear between measured points, flat below the smallest (a forward there
is bound by launches and host work, which splitting the tokens does not shorten), proportional above the largest.
A rank holding k guidance passes runs them batched or one at a time, whichever the curve says is faster (what
`memory.pass_policy` picks). Collectives are not overlapped with compute: each costs its bytes over the link's
bandwidth plus a latency per exchange step. The parts around the transformer (prompt encoding, upsampling, stage
2's LoRA fusion, decoding, writing) are one-GPU times; `spread` divides the text and decode parts as issue 38's
items 1–2 do (prompts on two ranks, decode tiles over all).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ltx2_core.model.transformer.config import AUDIO_DEFAULTS, VIDEO_DEFAULTS, TransformerConfig
from ltx2_core.parallel.config import ParallelConfig, stage_layout
from ltx2_core.parallel.hardware import DECODE_S, GPUS, LINKS, MEASURED, ForwardTimes, Gpu, Link
from ltx2_core.parallel.traffic import Tokens, block_flops, cfg_gather_bytes, forward_traffic, weight_bytes
from ltx2_core.geometry import audio_latent_length
from ltx2_core.releases import RELEASED_HEADS, ModelVersion

# one-GPU seconds of the parts the GPU suite has not timed yet: estimates, replaced when bench/end_to_end.py runs
TEXT_S = 0.25  # Gemma 3 12B, two prompts of 1,024 tokens: ≈ 50 TFLOP at ≈ 25 % of 800 TFLOP/s
UPSAMPLE_S = 0.1
LORA_FUSE_S = 8.0  # stage 2's distilled LoRA fused into and restored from 36 GB of blocks (docs/performance.md)
AUDIO_AND_WRITE_S = 1.0  # audio VAE, vocoder, H.264 + AAC write of 121 frames


def released_config(version: str = "2.3") -> TransformerConfig:
    """The released transformer's sizes (48 blocks, video 32 × 128, audio 32 × 64) with the version's flags."""
    v = ModelVersion(version)
    return TransformerConfig(version=v, video=VIDEO_DEFAULTS, audio=AUDIO_DEFAULTS, num_layers=48,
                             caption_channels=None if v != ModelVersion.V2_0 else 3840,
                             gated_attention=v != ModelVersion.V2_0, cross_attention_adaln=v != ModelVersion.V2_0,
                             prompt_adaln=v == ModelVersion.V2_3, ff_bias=v != ModelVersion.V2_5,
                             audio_ff_bias=v != ModelVersion.V2_5)


@dataclass(frozen=True)
class Stage:
    tokens: Tokens
    steps: int
    passes: int  # guidance passes per step (4 with the release's guidance, 1 distilled)


@dataclass(frozen=True)
class Workload:
    """A two-stage run: stage 1 at half size, guided; stage 2 at full size, distilled (3 steps)."""

    name: str
    stages: tuple[Stage, Stage]
    pixels: int  # output pixels per frame (decode time)
    decoder: str = "conv"


def video_tokens(width: int, height: int, frames: int) -> int:
    return ((frames - 1) // 8 + 1) * (height // 32) * (width // 32)


def two_stage(width: int, height: int, frames: int = 121, steps: int = 30, passes: int = 4,
              decoder: str = "conv", fps: float = 24.0) -> Workload:
    """The release's two-stage run at `width`×`height`×`frames` (stage 1 at half size)."""
    audio = audio_latent_length(frames, fps)
    half = Tokens(video_tokens(width // 2, height // 2, frames), audio)
    full = Tokens(video_tokens(width, height, frames), audio)
    return Workload(f"{width}×{height}×{frames}", (Stage(half, steps, passes), Stage(full, 3, 1)), width * height,
                    decoder)


@dataclass(frozen=True)
class Setting:
    """Where the run happens: the GPU kind, the link between the ranks, and what is spread beside the transformer."""

    gpu: Gpu = GPUS["H100"]
    link: Link = LINKS["nvlink4"]
    spread: bool = False  # text encoding over 2 ranks, decode tiles over all (issue 38 items 1–2)
    # stage 2's distilled LoRA fused and restored per run (its 8 s is an estimate, not measured: off by default, so
    # that no layout is chosen for it; on: tp divides it)
    lora_fuse: bool = False
    times: ForwardTimes | None = None  # measured forward times (default: MEASURED for the version on the H100)


@dataclass(frozen=True)
class StageTime:
    layout: ParallelConfig
    compute: float
    comm: float

    @property
    def seconds(self) -> float:
        return self.compute + self.comm


@dataclass(frozen=True)
class Prediction:
    """Seconds of each part of one run on `gpus` GPUs with stage 1 and stage 2 in their layouts."""

    gpus: int
    stages: tuple[StageTime, StageTime]
    parts: dict[str, float] = field(default_factory=dict)  # text, upsample, lora, reshard, decode, audio_write

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stages) + sum(self.parts.values())


def forward_seconds(times: ForwardTimes, config: TransformerConfig, tokens: Tokens, layout: ParallelConfig,
                    gpu: Gpu, batch: int = 1) -> float:
    """Seconds one rank spends on one forward of `batch` passes: the measured curves (per block, and fixed per
    forward) read at the rank's FLOPs per block, never below the host's time (the smallest measured size, where
    the device waits for launches: fewer FLOPs or a faster device do not shorten it)."""
    flops = batch * block_flops(config, tokens, layout)
    points = [(block_flops(config, Tokens(t, tokens.audio, tokens.text)), b, a) for t, b, a in times.points()]
    per_block, fixed = _curve([(f, b) for f, b, _ in points], flops), _curve([(f, a) for f, _, a in points], flops)
    host = points[0][2] + config.num_layers * points[0][1]
    return max(host, (fixed + config.num_layers * per_block) * gpu.compute_scale)


def _curve(points: list[tuple[float, float]], x: float) -> float:
    """`points` (by x) read at `x`: linear between them, flat below the first, proportional above the last."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1] * x / points[-1][0]


def stage_time(stage: Stage, layout: ParallelConfig, config: TransformerConfig, setting: Setting) -> StageTime:
    """Seconds of one stage's steps in `layout` (compute and collectives, none overlapped)."""
    times = setting.times or measured(config.version.value, setting.gpu)
    mine = -(-stage.passes // layout.cfg)  # passes on the busiest rank
    one = forward_seconds(times, config, stage.tokens, layout, setting.gpu)
    batched = forward_seconds(times, config, stage.tokens, layout, setting.gpu, batch=mine)
    compute = stage.steps * min(mine * one, batched)
    traffic = forward_traffic(config, stage.tokens, layout)
    link = setting.link
    per_forward = ((traffic.sp_bytes + traffic.tp_bytes) / link.bandwidth
                   + (traffic.sp_steps * (layout.sp - 1) + traffic.tp_steps * (layout.tp - 1)) * link.latency)
    gather = (cfg_gather_bytes(stage.tokens, stage.passes, layout) / link.bandwidth
              + (layout.cfg - 1) * link.latency) if layout.cfg > 1 else 0.0
    return StageTime(layout, compute, stage.steps * (mine * per_forward + gather))


def measured(version: str, gpu: Gpu) -> ForwardTimes:
    """The forward times the model has for `version` on `gpu` (those of the GPU it is derived from)."""
    found = MEASURED.get((version, gpu.measured_on))
    if found is None:
        have = ", ".join(f"{v} on {g}" for v, g in MEASURED)
        raise ValueError(f"no measured forward times of LTX-{version} for the {gpu.name} (from the "
                         f"{gpu.measured_on}); the model has {have}: run bench/scale_forward.py there")
    return found


def layouts(gpus: int, passes: int, heads: tuple[int, ...] = RELEASED_HEADS) -> list[ParallelConfig]:
    """Every cfg × sp × tp of exactly `gpus` ranks that the heads and the passes allow."""
    found = []
    for cfg in range(1, min(passes, gpus) + 1):
        for tp in range(1, gpus // cfg + 1):
            if gpus % (cfg * tp) == 0:
                config = ParallelConfig(cfg, gpus // (cfg * tp), tp)
                if all(h % (config.sp * config.tp) == 0 for h in heads):
                    found.append(config)
    return found


def around_seconds(workload: Workload, gpus: int, setting: Setting) -> dict[str, float]:
    """One run's parts beside the denoising: prompt encoding, upsampling, LoRA fusion, decode, audio and write."""
    decode = _decode_seconds(workload)
    return {"text": TEXT_S / (min(2, gpus) if setting.spread else 1), "upsample": UPSAMPLE_S,
            "decode": decode / (gpus if setting.spread else 1), "audio_write": AUDIO_AND_WRITE_S}


def _decode_seconds(workload: Workload) -> float:
    (p0, s0), (p1, s1) = sorted(DECODE_S[workload.decoder].items())
    return s0 + (s1 - s0) * (workload.pixels - p0) / (p1 - p0)


def lora_seconds(stage2: ParallelConfig, setting: Setting) -> float:
    """Stage 2's LoRA fusion and restore: each rank fuses its own share of the blocks (tp divides them)."""
    return LORA_FUSE_S / stage2.tp if setting.lora_fuse else 0.0


def reshard_seconds(first: ParallelConfig, second: ParallelConfig, config: TransformerConfig,
                    setting: Setting) -> float:
    """Moving to stage 2's layout and back for the next run's stage 1 (the workers persist): only a lower tp moves
    weights (each rank fetches the shards it lacks over the link; a higher tp drops some); cfg and sp hold the whole
    model on every rank, so regrouping them moves only the latent (a few MB, left out)."""
    there = weight_bytes(config, second.tp) - weight_bytes(config, first.tp)
    return abs(there) / setting.link.bandwidth


def predict(workload: Workload, first: ParallelConfig, second: ParallelConfig, config: TransformerConfig,
            setting: Setting) -> Prediction:
    """The run's time with stage 1 in `first` and stage 2 in `second` (of the same number of GPUs)."""
    if first.world_size != second.world_size:
        raise ValueError(f"both stages run on the same GPUs: {first.world_size} ≠ {second.world_size}")
    stages = (stage_time(workload.stages[0], first, config, setting),
              stage_time(workload.stages[1], second, config, setting))
    parts = around_seconds(workload, first.world_size, setting)
    parts["lora"] = lora_seconds(second, setting)
    parts["reshard"] = reshard_seconds(first, second, config, setting) if first != second else 0.0
    return Prediction(first.world_size, stages, parts)


def second_layout(workload: Workload, layout: ParallelConfig, config: TransformerConfig,
                  setting: Setting) -> ParallelConfig:
    """The layout the runtime runs stage 2 in under the loaded `layout`: where stage 2 has fewer passes than cfg
    ranks, the layout its cfg and sp ranks regroup into (`config.stage_layout`: no weight moves) when the model
    predicts it faster (its all-to-alls against the duplicated work: it pays over NVLink, not over Ethernet), else
    `layout` (stage 2 then runs whole on every cfg rank)."""
    merged = stage_layout(layout, workload.stages[1].passes, (config.video.heads, config.audio.heads))
    if merged == layout:
        return layout
    return min((layout, merged), key=lambda second: predict(workload, layout, second, config, setting).seconds)


def single(workload: Workload, layout: ParallelConfig, config: TransformerConfig, setting: Setting) -> Prediction:
    """The run under one loaded layout, as the runtime runs it (stage 2 in `second_layout`)."""
    return predict(workload, layout, second_layout(workload, layout, config, setting), config, setting)


def best(workload: Workload, gpus: int, config: TransformerConfig, setting: Setting,
         min_tp: int = 1) -> tuple[Prediction, Prediction]:
    """The fastest single layout for the whole run, and the fastest pair (one layout per stage, re-sharding
    counted); `min_tp`: the tensor-parallel degree the weights need to fit."""
    options = [c for c in layouts(gpus, workload.stages[0].passes) if c.tp >= min_tp]
    distilled = options  # any layout of the same GPUs for stage 2 (a tp change re-shards the weights)
    if not options:
        raise ValueError(f"no layout of {gpus} GPUs has tp ≥ {min_tp} for heads {RELEASED_HEADS}")
    one = min((single(workload, c, config, setting) for c in options), key=lambda p: p.seconds)
    pair = min((predict(workload, a, b, config, setting) for a in options for b in distilled),
               key=lambda p: p.seconds)
    return one, pair
