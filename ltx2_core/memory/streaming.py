"""Streamed blocks: a card smaller than the weights runs the model by copying each block to the device just before
it runs (the DiT's transformer blocks; Gemma 3's decoder layers while a prompt is encoded).

`stream_blocks(model, device, resident=N)` keeps the non-block weights and the first N blocks on the device and the
other blocks in host memory: pinned (page-locked: the fastest copies, but RAM the system cannot swap) or, with
`pin=False`, as loaded (a tensor read from a safetensors file in its own dtype is a view of the memory-mapped file,
whose pages the system can drop and read again: slower copies, and the host waits for each, but no RAM of its own).
Two device slots, each the size of one block, take the streamed blocks in turn (blocks of different shapes, as
Gemma 4's sliding and full-attention layers, get two slots per shape): while block i runs from one slot,
block i+1 is copied into the other on a side stream, and the last block's hook already starts copying the first
streamed block of the next step. Copies wait on events (the slot's previous block has finished), compute waits on
events (its block has arrived): from pinned memory the host never waits, so a step keeps zero host syncs.
`park()` / `unpark()` move what stays on the device (the non-block weights, the resident blocks, the slots) to the
host and back: a streamed Gemma leaves the device between encodings. All guidance passes of a step are one batched
forward, so one streamed copy of the weights serves every pass (ComfyUI streams per pass).

A block's parameters and buffers are bound to its slot's tensors for its forward (`param.data` swaps, host-side
pointer changes) and to its host tensors otherwise, so LoRA fusion, state dicts and `parameters()` see the host
copies at rest. On a CPU "device" the same code runs with plain copies (tests); CUDA graphs and torch.compile need
fixed weight addresses and are not combined with streaming.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn


class _Tensors(NamedTuple):
    names: tuple[str, ...]
    host: list[torch.Tensor]  # one block's tensors in host memory, in `names` order


def _tensors(block: nn.Module) -> dict[str, torch.Tensor]:
    return dict(block.named_parameters()) | {name: b for name, b in block.named_buffers() if b is not None}


def _bind(block: nn.Module, names: tuple[str, ...], tensors: list[torch.Tensor]) -> None:
    for name, tensor in zip(names, tensors):
        owner_name, _, attr = name.rpartition(".")
        owner = block.get_submodule(owner_name) if owner_name else block
        current = getattr(owner, attr)
        if isinstance(current, nn.Parameter):
            current.data = tensor
        else:
            owner._buffers[attr] = tensor


def move_module(module: nn.Module, device: torch.device | str) -> nn.Module:
    """`module.to(device)` that replaces each parameter and buffer not yet there (never `.data` swaps, which mixed
    tensor types refuse, e.g. the fake tensors of the memory tests); returns the module."""
    device = torch.device(device)
    for owner in module.modules():
        for name, param in owner._parameters.items():
            if param is not None and param.device != device:
                owner._parameters[name] = nn.Parameter(param.detach().to(device), param.requires_grad)
        for name, buffer in owner._buffers.items():
            if buffer is not None and buffer.device != device:
                owner._buffers[name] = buffer.to(device)
    return module


class BlockStreamer:
    """The hooks and slots of one streamed model (see the module docstring); `device_weight_bytes()` is what the
    weights occupy on the device: the resident tensors plus the two slots."""

    def __init__(self, model: nn.Module, device: torch.device | str, resident: int,
                 blocks: str = "transformer_blocks", pin: bool = True) -> None:
        self.model, self.device = model, torch.device(device)
        blocks_name, blocks = blocks, list(getattr(model, blocks))
        self.blocks_name, self.resident = blocks_name, blocks[:resident]
        if not 0 <= resident <= len(blocks):
            raise ValueError(f"resident blocks must be between 0 and {len(blocks)}, got {resident}")
        self._move_resident(self.device)
        self.streamed = blocks[resident:]
        if self.streamed and getattr(model, "cache_text_kv", False):
            # the per-run text K/V (2.0, 2.5) are computed outside the blocks' forwards, where a streamed block's
            # weights are in host memory: computed per forward instead (the memory plan drops the cache first)
            model.cache_text_kv = False
        self.cuda = self.device.type == "cuda"
        self.blocks: list[_Tensors] = []
        for block in self.streamed:
            tensors = _tensors(block)
            host = [t.detach().to("cpu") for t in tensors.values()]
            host = [t.pin_memory() for t in host] if self.cuda and pin else host
            _bind(block, tuple(tensors), host)
            self.blocks.append(_Tensors(tuple(tensors), host))
        # blocks of one shape share two slots (kind k: slots 2k and 2k + 1); most models have one kind
        shapes = [tuple((name, tuple(t.shape), t.dtype) for name, t in zip(b.names, b.host)) for b in self.blocks]
        kinds = list(dict.fromkeys(shapes))
        self.kind_of = [kinds.index(shape) for shape in shapes]
        self.templates = [self.blocks[shapes.index(kind)].host for kind in kinds]
        self.slots, self.parked = self._new_slots(), False
        self.copy_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.arrived: list = [None] * len(self.streamed)  # per streamed block: the event of its copy
        self.slot_of: list[int] = [0] * len(self.streamed)
        self.freed: list = [None] * (2 * len(kinds))  # per slot: the event after the last block that ran from it
        self.next_slot, self.in_flight = [0] * len(kinds), None
        self.handles = []
        for index, block in enumerate(self.streamed):
            self.handles.append(block.register_forward_pre_hook(lambda _m, _a, i=index: self._before(i)))
            self.handles.append(block.register_forward_hook(lambda _m, _a, _o, i=index: self._after(i)))

    def _new_slots(self) -> list[list[torch.Tensor]]:
        return [[torch.empty_like(t, device=self.device) for t in template] for template in self.templates
                for _ in range(2)]

    def _move_resident(self, device: torch.device) -> None:
        for name, module in self.model.named_children():
            if name != self.blocks_name:
                move_module(module, device)
        for name, param in self.model._parameters.items():
            if param is not None and param.device != device:
                self.model._parameters[name] = nn.Parameter(param.detach().to(device), param.requires_grad)
        for block in self.resident:
            move_module(block, device)

    def park(self) -> None:
        """Moves what the model keeps on the device (its non-block weights, resident blocks) to the host and frees
        the two slots: between encodings a streamed Gemma leaves the device to the transformer."""
        self.settle()
        self._move_resident(torch.device("cpu"))
        self.slots, self.parked = [], True

    def unpark(self) -> None:
        """Back on the device after `park` (nothing when it is there)."""
        if not self.parked:
            return
        self._move_resident(self.device)
        self.slots, self.parked = self._new_slots(), False
        self.next_slot, self.in_flight = [0] * len(self.templates), None

    def device_weight_bytes(self) -> int:
        streamed = {id(t) for block in self.streamed for t in _tensors(block).values()}
        tensors = list(self.model.parameters()) + [b for b in self.model.buffers() if b is not None]
        resident = sum(t.numel() * t.element_size() for t in tensors if id(t) not in streamed)
        return resident + sum(t.numel() * t.element_size() for slot in self.slots for t in slot)

    def _copy(self, index: int) -> None:
        """Issues block `index`'s copy into the next slot of its kind (they alternate), once the slot's last block
        is done."""
        kind = self.kind_of[index]
        slot, self.next_slot[kind] = 2 * kind + self.next_slot[kind], 1 - self.next_slot[kind]
        self.slot_of[index], self.in_flight = slot, index
        if not self.cuda:
            for dst, src in zip(self.slots[slot], self.blocks[index].host):
                dst.copy_(src)
            return
        with torch.cuda.stream(self.copy_stream):
            if self.freed[slot] is not None:
                self.copy_stream.wait_event(self.freed[slot])
            for dst, src in zip(self.slots[slot], self.blocks[index].host):
                dst.copy_(src, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.copy_stream)
        self.arrived[index] = event

    def _before(self, index: int) -> None:
        if self.in_flight != index:  # the first forward, or blocks run out of order
            self._copy(index)
        if self.cuda:
            torch.cuda.current_stream(self.device).wait_event(self.arrived[index])
        _bind(self.streamed[index], self.blocks[index].names, self.slots[self.slot_of[index]])
        self._copy((index + 1) % len(self.streamed))  # the next one into the other slot (after the last: the first)

    def _after(self, index: int) -> None:
        if self.cuda:
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.device))
            self.freed[self.slot_of[index]] = event
        _bind(self.streamed[index], self.blocks[index].names, self.blocks[index].host)

    def settle(self) -> None:
        """Before the host copies change (a LoRA fused or restored, between runs): waits for the copy in flight
        and forgets it, so the next forward copies the changed weights. A host wait, never inside a step."""
        if self.in_flight is not None and self.cuda and self.arrived[self.in_flight] is not None:
            self.arrived[self.in_flight].synchronize()
        self.in_flight = None

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def stream_blocks(model: nn.Module, device: torch.device | str, resident: int = 0,
                  blocks: str = "transformer_blocks", pin: bool = True) -> BlockStreamer:
    """Streams the blocks of `model` (its ModuleList `blocks`: the DiT's transformer_blocks, Gemma's layers) past
    the first `resident` through two device slots (module docstring), from pinned host memory unless `pin` is
    False; the streamer is kept as `model.block_streamer`."""
    streamer = BlockStreamer(model, device, resident, blocks, pin)
    object.__setattr__(model, "block_streamer", streamer)  # not a submodule: no state dict entries
    return streamer
