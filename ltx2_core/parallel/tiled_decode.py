"""The tiled video decode spread over the ranks of a process group, blended exactly as one device blends it.

The tiles are the one-device decode's (`tiling.video_tiles`; the LTX-2.5 diffusion decoder's stage-4-5 tiles,
`diffusion_tiling.plan_tiles`), dealt round robin: tile i is decoded by rank i mod N. Every rank multiplies its
tiles by their blend weights as one device does and sends them, one at a time, to the root, which adds all tiles
into the video in the one-device order (its own as it decodes them, the others' as it receives them). So the sums
are the same sums in the same order: the video equals the one-device tiled decode.

What is shared first: the convolutional decoder's prepared latent (decode noise included) is broadcast from the
root, so every rank decodes the root's latent whatever its generator; the diffusion decoder broadcasts the latent
and the root's generator state (its starting noise is video-sized: each rank draws it from the same state), and
every rank runs its stages 1-3 on the whole latent (as one device does), only stages 4-5 being split.

Memory: the root holds what the one-device decode holds (the video, the weight sum of the diffusion decoder) plus
one received tile; another rank holds no video, only the tile it decodes and the one it is sending (the diffusion
decoder also the stage-4 input and the starting noise, as one device). Bytes sent: the root sends the broadcast
latent (and generator state) to each other rank; a rank sends its weighted tiles (fp32 for the convolutional
decoder, the decoder's dtype for the diffusion one). `DecodeTraffic` counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ltx2_core.model.video_vae.decoder import VideoDecoder
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model.video_vae.diffusion_tiling import (TiledDecode, blank_pixels, crop_video, decode_tile as
                                                        diffusion_tile, finish, pixel_slices, plan_tiles, tile_mask)
from ltx2_core.model.video_vae.tiling import TilingConfig, blank_video, decode_tile, decode_video, tile_axes, \
    video_tiles


@dataclass
class DecodeTraffic:
    """What one rank did in a spread decode: the indices of the tiles it decoded (blend order), of all tiles, the
    payload bytes it sent (broadcasts counted once per receiving rank) and the tile bytes it received (the root)."""

    tiles: list[int] = field(default_factory=list)
    count: int = 0
    sent_bytes: int = 0
    received_bytes: int = 0

    def add(self, tensor: torch.Tensor, receivers: int = 1) -> None:
        self.sent_bytes += tensor.numel() * tensor.element_size() * receivers


class SpreadDecode:
    """`decode_video` over the ranks of `group` (default: the world): call it on every rank with a latent of the
    same shape; the root (group rank `root`) gets the video, the others None. `last` is this rank's traffic of the
    latest call. `report` (e.g. `print` on the root) is told in one line how the decode was spread."""

    def __init__(self, group: dist.ProcessGroup | None = None, root: int = 0,
                 report: Callable[[str], None] | None = None) -> None:
        self.group, self.root, self.report = group, root, report
        self.last = DecodeTraffic()

    def __call__(self, latent: torch.Tensor, decoder: VideoDecoder | DiffusionVideoDecoder,
                 tiling: TilingConfig | None = TilingConfig(), *, generator: torch.Generator | None = None,
                 timestep: torch.Tensor | None = None,
                 output_device: torch.device | str | None = None) -> torch.Tensor | None:
        video, self.last = decode_across(latent, decoder, tiling, self.group, generator=generator, timestep=timestep,
                                         output_device=output_device, root=self.root)
        if self.report is not None:
            self.report(f"video decoded in {self.last.count} tiles over {dist.get_world_size(self.group)} ranks "
                        f"({len(self.last.tiles)} here); {self.last.received_bytes / 2**20:.1f} MiB of tiles "
                        "received from the others")
        return video


def decode_across(latent: torch.Tensor, decoder: VideoDecoder | DiffusionVideoDecoder,
                  tiling: TilingConfig | None = TilingConfig(), group: dist.ProcessGroup | None = None, *,
                  generator: torch.Generator | None = None, timestep: torch.Tensor | None = None,
                  output_device: torch.device | str | None = None,
                  root: int = 0) -> tuple[torch.Tensor | None, DecodeTraffic]:
    """`tiling.decode_video` spread over `group`'s ranks: (the video on the root, None elsewhere; this rank's
    traffic). Every rank calls it with the same decoder weights and a latent of the same shape; the root's latent
    and generator are the ones decoded. One rank (or one tile) decodes on the root alone."""
    ranks, rank = dist.get_world_size(group), dist.get_rank(group)
    traffic = DecodeTraffic()
    if ranks == 1:
        return decode_video(latent, decoder, tiling, generator=generator, timestep=timestep,
                            output_device=output_device), traffic
    if isinstance(decoder, DiffusionVideoDecoder):
        video = _diffusion(latent, decoder, tiling, _Link(group, root, latent.device, traffic), generator)
        return (None if video is None else video.float().to(output_device or latent.device)), traffic
    link = _Link(group, root, latent.device, traffic)
    z = link.broadcast(decoder.prepare(latent, generator) if rank == root else torch.empty_like(latent))
    axes = tile_axes(tuple(z.shape[2:]), tiling or TilingConfig.off())
    tiles = video_tiles(axes)
    traffic.count = len(tiles)
    if len(tiles) == 1:
        return (decoder.decode_prepared(z, timestep, torch.float32).to(output_device or z.device)
                if rank == root else None), traffic
    out = blank_video(decoder, z, axes, output_device or z.device) if rank == root else None
    for index, tile in enumerate(tiles):
        mine = index % ranks == rank
        piece = decode_tile(decoder, z, tile, timestep) if mine else None
        traffic.tiles += [index] if mine else []
        shape = (z.shape[0], decoder.config.out_channels, *(s.stop - s.start for s in tile.output))
        piece = link.deliver(piece, index % ranks, shape, torch.float32)
        if out is not None:
            out[(slice(None), slice(None), *tile.output)] += piece.to(out.device)
    link.drain()
    return out, traffic


def _diffusion(latent: torch.Tensor, decoder: DiffusionVideoDecoder, tiling: TilingConfig | None, link: _Link,
               generator: torch.Generator | None) -> torch.Tensor | None:
    """The diffusion decoder's stage-4-5 tiles spread (stages 1-3 on every rank); the root's padded video."""
    if generator is None:
        raise ValueError("the diffusion decoder spread over ranks draws its starting noise on every rank: pass a "
                         "torch.Generator (its state is the root's on every rank)")
    rank = dist.get_rank(link.group)
    latent = link.broadcast(latent.contiguous() if rank == link.root else torch.empty_like(latent))
    state = link.broadcast(generator.get_state()).cpu()
    generator.set_state(state)
    plan: TiledDecode = plan_tiles(decoder, latent, tiling, generator=generator)
    link.traffic.count = len(plan.tiles)
    if len(plan.tiles) == 1:
        return crop_video(plan, diffusion_tile(decoder, plan, plan.tiles[0]), latent.dtype) if rank == link.root \
            else None
    out, weights = blank_pixels(plan) if rank == link.root else (None, None)
    ranks = dist.get_world_size(link.group)
    for index, tile in enumerate(plan.tiles):
        mine = index % ranks == rank
        piece = diffusion_tile(decoder, plan, tile) * tile_mask(plan, tile) if mine else None
        link.traffic.tiles += [index] if mine else []
        h_px, w_px = pixel_slices(plan, tile)
        shape = (*plan.x_init.shape[:3], h_px.stop - h_px.start, w_px.stop - w_px.start)
        piece = link.deliver(piece, index % ranks, shape, plan.feature.dtype)
        if out is not None:
            out[:, :, :, h_px, w_px] += piece.to(out.device)
            weights[h_px, w_px] += tile_mask(plan, tile)
    link.drain()
    return None if out is None else finish(plan, out, weights, latent.dtype)


class _Link:
    """The group's transfers of one decode, counted in `traffic`: broadcasts from the root, and tiles sent to the
    root one at a time (a rank keeps at most one tile in flight while it decodes the next)."""

    def __init__(self, group: dist.ProcessGroup | None, root: int, device: torch.device,
                 traffic: DecodeTraffic) -> None:
        self.group, self.root, self.traffic = group, root, traffic
        self.rank, self.ranks = dist.get_rank(group), dist.get_world_size(group)
        nccl = dist.get_backend(group) == "nccl"
        self.device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
        self.pending: tuple[dist.Work, torch.Tensor] | None = None

    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        """The root's `tensor` on every rank (same shape and dtype given everywhere), on `tensor`'s device."""
        moved = tensor.to(self.device).contiguous()
        dist.broadcast(moved, self._global(self.root), self.group)
        if self.rank == self.root:
            self.traffic.add(moved, self.ranks - 1)
        return moved.to(tensor.device)

    def deliver(self, piece: torch.Tensor | None, owner: int, shape: tuple[int, ...],
                dtype: torch.dtype) -> torch.Tensor | None:
        """A tile from its owner to the root: the root gets it (its own as it is), the owner sends it."""
        if owner == self.root:
            return piece
        if self.rank == self.root:
            buffer = torch.empty(shape, dtype=dtype, device=self.device)
            dist.recv(buffer, self._global(owner), self.group)
            self.traffic.received_bytes += buffer.numel() * buffer.element_size()
            return buffer
        if piece is not None:
            self.drain()
            moved = piece.to(self.device).contiguous()
            self.pending = (dist.isend(moved, self._global(self.root), self.group), moved)
            self.traffic.add(moved)
        return None

    def drain(self) -> None:
        """Waits for the tile in flight, if any."""
        if self.pending is not None:
            self.pending[0].wait()
            self.pending = None

    def _global(self, group_rank: int) -> int:
        return dist.get_global_rank(self.group, group_rank) if self.group is not None else group_rank
