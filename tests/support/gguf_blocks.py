"""Random ggml blocks with valid fp16 scales, for the block types the `gguf` package cannot quantise itself."""

from __future__ import annotations

import numpy as np

# byte offsets of each block type's fp16 scales (d, dmin) inside a block
F16_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q2_K": (80, 82),
              "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def random_blocks(name: str, count: int, type_size: int, rng: np.random.Generator, top: float = 2.0) -> np.ndarray:
    """`count` random blocks of type `name` as bytes (count, type_size), their fp16 scales in ±[top/2000, top]."""
    blocks = rng.integers(0, 256, size=(count, type_size), dtype=np.uint8)
    for offset in F16_FIELDS[name]:
        scale = (rng.uniform(top / 2000, top, count) * rng.choice([-1, 1], count)).astype(np.float16)
        blocks[:, offset:offset + 2] = scale.view(np.uint8).reshape(count, 2)
    return blocks
