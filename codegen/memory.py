"""Memory planning: intermediates with static sizes share one arena by liveness.

Greedy best-fit over lifetimes (the same idea as onnxruntime's mem pattern and
TVM's storage rewrite): a buffer reuses a byte range whose previous tenant is
dead. Values with symbolic sizes are left to the runtime allocator.
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


@dataclass
class Buffer:
    key: int        # id of the IR value
    size: int       # bytes
    first: int      # index of the producing step
    last: int       # index of the last reading step


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan(buffers: list[Buffer], reuse: bool = True) -> tuple[dict[int, int], int]:
    """Returns (key -> byte offset, arena size); without ``reuse`` every buffer gets its own bytes."""
    if not reuse:
        offsets, arena = {}, 0
        for buf in buffers:
            offsets[buf.key] = arena
            arena += aligned(max(buf.size, 1))
        return offsets, arena
    placed: list[tuple[int, int, Buffer]] = []  # (offset, size, buffer)
    offsets: dict[int, int] = {}
    arena = 0
    for buf in sorted(buffers, key=lambda b: (-b.size, b.first)):
        size = aligned(max(buf.size, 1))
        busy = sorted((off, sz) for off, sz, other in placed
                      if not (other.last < buf.first or buf.last < other.first))
        offset, best = None, None
        cursor = 0
        for off, sz in busy:
            gap = off - cursor
            if gap >= size and (best is None or gap < best):
                offset, best = cursor, gap
            cursor = max(cursor, off + sz)
        if offset is None:
            offset = cursor
        placed.append((offset, size, buf))
        offsets[buf.key] = offset
        arena = max(arena, offset + size)
    return offsets, arena
