"""Memory planning: intermediates with static sizes share one arena by liveness.

Greedy best-fit over lifetimes (the same idea as onnxruntime's mem pattern and
TVM's storage rewrite): a buffer reuses a byte range whose previous tenant is
dead. An elementwise node may also write its output over an input that dies at
that node (in place): the two are planned as one buffer. A node that only copies
its inputs into blocks of its output (Concat) may find them there already: they
are planned as views inside it, and their producers write them in place. Values
with symbolic sizes are left to the runtime allocator.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, Optional, TypeVar

ALIGN = 64
K = TypeVar("K", bound=Hashable)   # what a buffer holds (the emitter's: the IR value)


@dataclass
class Buffer(Generic[K]):
    key: K          # what it holds
    size: int       # bytes
    first: int      # index of the producing step
    last: int       # index of the last reading step


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def thread_part(count: int, itemsize: int) -> int:
    """A thread's part of a kernel's scratch, ``count`` items of ``itemsize`` bytes, rounded up
    to whole ALIGN-byte lines (in items), so that two threads never write one cache line: on
    small maps, where a channel takes a fraction of a microsecond, a line passed back and forth
    between the cores cost more than the second thread gave."""
    return aligned(count * itemsize) // itemsize


def plan(buffers: list[Buffer[K]], reuse: bool = True, shares: Optional[dict[K, K]] = None,
         views: Optional[dict[K, tuple[K, int]]] = None) -> tuple[dict[K, int], int]:
    """Returns (key -> byte offset, arena size); without ``reuse`` every buffer gets its own bytes.
    ``shares``: key -> the key of a buffer it is written over (same size, whose last use is
    this one's first step); such chains get one byte range for their joint lifetime.
    ``views``: key -> (key of a larger buffer, byte offset) where it lives inside that one
    (which may itself be a view); the outermost buffer holds its bytes from the first
    step of any of them to the last (keys of views take part in no share)."""
    if views:
        def anchor(key: K) -> tuple[K, int]:
            offset = 0
            while key in views:
                key, at = views[key]
                offset += at
            return key, offset
        span = {b.key: [b.first, b.last] for b in buffers if b.key not in views}
        for b in buffers:
            s = span[anchor(b.key)[0]]
            s[0], s[1] = min(s[0], b.first), max(s[1], b.last)
        offsets, arena = plan([Buffer(b.key, b.size, *span[b.key]) for b in buffers if b.key not in views],
                              reuse, shares)
        for b in buffers:
            if b.key in views:
                root, offset = anchor(b.key)
                offsets[b.key] = offsets[root] + offset
        return offsets, arena
    if shares:
        root: dict[K, K] = {}
        for key in (b.key for b in buffers):
            r = key
            while r in shares:
                r = shares[r]
            root[key] = r
        joint: dict[K, Buffer[K]] = {}
        for b in buffers:
            r = root[b.key]
            j = joint.setdefault(r, Buffer(r, b.size, b.first, b.last))
            j.size, j.first, j.last = max(j.size, b.size), min(j.first, b.first), max(j.last, b.last)
        offsets, arena = plan(list(joint.values()), reuse)
        return {b.key: offsets[root[b.key]] for b in buffers}, arena
    if not reuse:
        offsets, arena = {}, 0
        for buf in buffers:
            offsets[buf.key] = arena
            arena += aligned(max(buf.size, 1))
        return offsets, arena
    placed: list[tuple[int, int, Buffer]] = []  # (offset, size, buffer)
    offsets: dict[K, int] = {}
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
