"""The video decode spread over the persistent workers (`Controller.call`): the same tiles, blended as one device
blends them (`parallel.tiled_decode.decode_across`), on the workers that hold the transformer.

    decode = WorkerDecode(controller)                # a `stages.VideoDecode`
    video = decode(latent, decoder, tiling, generator=generator, output_device="cpu")
    generate(..., distribution=Distribution(video_decode=decode))   # or stages.decode(..., video_decode=decode)

The caller sends a `DecodeTask` (the CPU latent, the tiling, the generator's state, its decoder's `Signature`);
every worker loads the video decoder from its spec's files in its spec's dtype when first asked (the same file and
dtype the caller's loader read: `ModelFiles.load_checkpoint`) and keeps it across jobs (`TaskContext.kept`), so a
worker holds the decoder's weights beside its shard from its first decode on. Rank 0 compares the caller's
decoder with its own (class, dtype, every tensor's shape and sums) before any tile: other weights are refused,
every rank skips the decode and `WorkerDecode` raises ValueError naming the fix. Rank 0 then blends the tiles and
sends the video (CPU) and the generator's state after the decode back, so the caller's generator continues as after
a decode here.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.distributed as dist

from ltx2_core.loader import load_video_decoder
from ltx2_core.loader.sources import Component
from ltx2_core.model.float32 import in_float32
from ltx2_core.model.video_vae.decoder import VideoDecoder
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel.tiled_decode import DecodeTraffic, decode_across
from ltx2_core.runtime.controller import Controller, WorkerError
from ltx2_core.runtime.decode_fallback import decode_here, decoding_on_workers_failed
from ltx2_core.runtime.protocol import TaskContext

KEPT = "ltx2_core.runtime.decode_task"  # the workers' `kept` entry: [decoder, its Signature, decodes it ran]
SUM_TOLERANCE = 1e-9  # of a tensor's absolute sum: float64 sums in another order differ by ~1e-16 of it

Decoder = VideoDecoder | DiffusionVideoDecoder


_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # decoder -> (weight versions, Signature)


class Signature(NamedTuple):
    """What tells two video decoders' weights apart: the class, the dtype, every floating tensor's name and shape,
    and its sum and absolute sum (float64)."""

    kind: str
    dtype: str
    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    sums: tuple[tuple[float, float], ...]

    @classmethod
    def of(cls, decoder: Decoder) -> Signature:
        tensors = [(n, t) for n, t in (*decoder.named_parameters(), *decoder.named_buffers()) if t.is_floating_point()]
        sums = torch.stack([torch.stack([t.sum(dtype=torch.float64), t.abs().sum(dtype=torch.float64)])
                            for _, t in tensors]).cpu().tolist() if tensors else []
        return cls(type(decoder).__name__, str(next(decoder.parameters()).dtype).removeprefix("torch."),
                   tuple((n, tuple(t.shape)) for n, t in tensors), tuple(map(tuple, sums)))

    @classmethod
    def cached(cls, decoder: Decoder) -> Signature:
        """`of(decoder)`, computed again only when a weight was replaced or changed in place since (its storage and
        version counter): the caller's decoder is fingerprinted once, not read whole at every decode. Inference
        tensors (a decoder loaded under `torch.inference_mode`, as in ComfyUI's executor) keep no version counter and
        can still be written in place inside inference mode, so such a decoder is fingerprinted at every call."""
        tensors = (*decoder.parameters(), *decoder.buffers())
        if any(t.is_inference() for t in tensors):
            return cls.of(decoder)
        versions = tuple((t.data_ptr(), t._version) for t in tensors)
        known = _SIGNATURES.get(decoder)
        if known is None or known[0] != versions:
            known = _SIGNATURES[decoder] = (versions, cls.of(decoder))
        return known[1]

    def matches(self, other: Signature) -> bool:
        return (self.kind, self.dtype, self.shapes) == (other.kind, other.dtype, other.shapes) and all(
            abs(a - b) <= SUM_TOLERANCE * max(size, other_size, 1e-30)
            for (a, size), (b, other_size) in zip(self.sums, other.sums))

    def describe(self) -> str:
        return f"{self.kind} in {self.dtype}"


class Decoded(NamedTuple):
    """Rank 0's answer: the video (CPU, float32) and the generator's state after the decode (None without a
    generator), its traffic, and how many decodes its kept decoder was asked for (this one included: 1 when it was
    loaded for this one); or why it `refused`."""

    video: torch.Tensor | None
    generator_state: torch.Tensor | None
    traffic: DecodeTraffic | None
    uses: int
    refused: str | None = None


class DecodeTask(NamedTuple):
    """`decode_video(latent, decoder, tiling, generator=..., timestep=...)` on every worker (module docstring).
    `generator_state`: the caller's generator's (None: no generator); `signature`: the caller's decoder's, in its
    own dtype; `float32`: the decode runs in float32 (HDR's: each worker's kept decoder cast for the call and put
    back in its dtype after it, `model.float32.in_float32`; the latent in float32)."""

    latent: torch.Tensor
    tiling: TilingConfig | None
    generator_state: torch.Tensor | None
    timestep: torch.Tensor | None
    signature: Signature
    float32: bool = False

    def run(self, context: TaskContext) -> Decoded | None:
        decoder, mine, uses = kept_decoder(context)
        refused = None if self.signature.matches(mine) else refusal(self.signature, mine, context.spec.files,
                                                                     context.spec.dtype)
        if _refused_on_root(refused is not None, context.device):
            return Decoded(None, None, None, uses, refused) if context.rank == 0 else None
        generator = None
        if self.generator_state is not None:
            generator = torch.Generator(context.device)
            generator.set_state(self.generator_state)
        with torch.no_grad(), in_float32(decoder) if self.float32 else contextlib.nullcontext():
            weight = next(decoder.parameters())
            video, traffic = decode_across(self.latent.to(weight.device, weight.dtype), decoder, self.tiling,
                                           generator=generator, output_device="cpu", timestep=None
                                           if self.timestep is None else self.timestep.to(weight.device))
        if context.rank != 0:
            return None
        return Decoded(video, None if generator is None else generator.get_state(), traffic, uses)


def kept_decoder(context: TaskContext) -> tuple[Decoder, Signature, int]:
    """This worker's video decoder (loaded from the spec's files in its dtype on the first call, then kept), its
    signature, and the decodes it has been asked for so far, this one included."""
    kept = context.kept.get(KEPT)
    if kept is None:
        decoder = load_decoder(context.spec.files, context.device, context.spec.dtype)
        kept = context.kept[KEPT] = [decoder, Signature.of(decoder), 0]
    kept[2] += 1
    return kept[0], kept[1], kept[2]


def load_decoder(files: ModelFiles, device: torch.device, dtype: torch.dtype | None) -> Decoder:
    """The video decoder `files.load_checkpoint(device, dtype)` gives (the demo's: its random weights)."""
    files = files.resolved()
    if files.checkpoint is None:
        from ltx2_core.demo import demo_decoders  # only for the demo model

        return demo_decoders(files.version).video.to(device=device, dtype=dtype)
    return load_video_decoder(files.sources()[Component.VIDEO_DECODER], device=device, dtype=dtype)


def refusal(caller: Signature, workers: Signature, files: ModelFiles, dtype: torch.dtype | None) -> str:
    """Why the workers do not decode with the caller's decoder, and the fix."""
    return (f"the video decoder given ({caller.describe()}) is not the one the workers decode with "
            f"({workers.describe()}, loaded from {files.label}{'' if dtype is None else f' as {dtype}'}): decode with the model's own "
            "decoder (loaded from the same file in the same dtype), or decode in this process (no `video_decode`; "
            "generate_on_workers(..., decode_on_workers=False))")


def _refused_on_root(refused: bool, device: torch.device) -> bool:
    """Rank 0's verdict on every rank (its signature check decides for all: no rank starts the collectives alone)."""
    flag = torch.tensor([int(refused)], device=device if dist.get_backend() == "nccl" else "cpu")
    dist.broadcast(flag, 0)
    return bool(flag.item())


class WorkerDecode:
    """A `stages.VideoDecode` whose tiles are spread over `controller`'s workers (module docstring). `last`: rank
    0's `Decoded` of the latest call (None when it was decoded here); `report` (e.g. print; None: a fallback's line
    is printed) is told in one line how the decode was spread. A worker out of memory: decoded here instead, as a
    decode here (`decode_fallback`: one line says why; `fell_back` names the ranks); other failures are raised.
    `float32`: HDR's decode (`runtime.float32_decode`): every worker, and a fallback here, casts its decoder to
    float32 for the call (`DecodeTask.float32`), the caller's decoder compared in its own dtype."""

    def __init__(self, controller: Controller, should_stop: Callable[[], bool] | None = None,
                 report: Callable[[str], None] | None = None, *, float32: bool = False) -> None:
        self.controller, self.should_stop, self.report = controller, should_stop, report
        self.float32 = float32
        self.last: Decoded | None = None
        self.fell_back: str | None = None  # the latest call's ranks that ran out of memory (decoded here instead)

    def __call__(self, latent: torch.Tensor, decoder: Decoder, tiling: TilingConfig | None = TilingConfig(), *,
                 generator: torch.Generator | None = None, timestep: torch.Tensor | None = None,
                 output_device: torch.device | str | None = None) -> torch.Tensor:
        if isinstance(decoder, DiffusionVideoDecoder) and generator is None:
            raise ValueError("the diffusion video decoder draws its starting noise: pass a torch.Generator")
        if generator is not None and generator.device.type != self.controller.device_type:
            raise ValueError(f"the decode's generator is on {generator.device.type} and the workers decode on "
                             f"{self.controller.device_type}: its state means other noise there; make the generator "
                             f"on {self.controller.device_type}")
        task = DecodeTask(latent.detach().cpu(), tiling, None if generator is None else generator.get_state(),
                          None if timestep is None else timestep.detach().cpu(), Signature.cached(decoder),
                          self.float32)
        try:
            decoded = self.controller.call(task, self.should_stop)
        except WorkerError as error:  # out of memory on a worker: decoded here (`decode_fallback`); else raised
            self.last, self.fell_back = None, decoding_on_workers_failed(error, self.report, latent.device)
            with in_float32(decoder) if self.float32 else contextlib.nullcontext():
                return decode_here(latent, decoder, tiling, generator=generator, generator_state=task.generator_state,
                                   timestep=timestep, output_device=output_device or latent.device,
                                   why=self.fell_back)
        self.last, self.fell_back = decoded, None
        if decoded.refused is not None:
            raise ValueError(decoded.refused)
        if generator is not None:
            generator.set_state(decoded.generator_state)
        if self.report is not None:
            traffic, ranks = decoded.traffic, self.controller.layout.world_size
            self.report(f"video decoded in {traffic.count} tiles over {ranks} workers; "
                        f"{traffic.received_bytes / 2**20:.1f} MiB of tiles received by rank 0")
        return decoded.video.to(output_device or latent.device)
