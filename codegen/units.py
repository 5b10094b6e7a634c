"""How a model's node functions are split into translation units that compile in parallel.

Most of a big model's build is the C compiler optimizing node functions and the kernel
helpers they call, one unit on one core. Split, the units build on every core and link
into one library. A kernel family's helpers are compiled in each unit that calls them (but
the GEMM and Winograd helpers, which are helper objects: helper_objects.py), so a family's
nodes stay together where the sizes allow. Small models stay one unit, and a model is never
split into more units than the cores that build it: each unit parses the runtime support and
the SIMD intrinsics' headers again (about half a second of CPU time) and compiles the helpers
it calls.
"""
from __future__ import annotations

from typing import Any

# Bytes of node-function source a unit is worth: below this a split costs more (the shared
# helpers parsed again) than it saves.
UNIT_BYTES = 24_000
MAX_UNITS = 8


def split_units(functions: list[dict[str, Any]], jobs: int) -> list[list[dict[str, Any]]]:
    """The node functions in at most ``jobs`` groups, one per extra unit, each in the model's
    order; [] when the model stays one unit. Families go whole to the least loaded unit,
    biggest first; a family larger than a unit's share is cut in the model's order."""
    nodes = [f for f in functions if f["kind"] == "node"]
    total = sum(len(f["body"]) for f in nodes)
    count = min(jobs, MAX_UNITS, total // UNIT_BYTES)
    if count < 2:
        return []
    share = total / count
    families: dict[str, list[dict[str, Any]]] = {}
    for f in nodes:
        families.setdefault(f["family"], []).append(f)
    pieces: list[list[dict[str, Any]]] = []
    for members in families.values():
        piece: list[dict[str, Any]] = []
        size = 0
        for f in members:
            if piece and size + len(f["body"]) > share:
                pieces.append(piece)
                piece, size = [], 0
            piece.append(f)
            size += len(f["body"])
        pieces.append(piece)
    units: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    loads = [0] * count
    for piece in sorted(pieces, key=lambda p: -sum(len(f["body"]) for f in p)):
        k = loads.index(min(loads))
        units[k] += piece
        loads[k] += sum(len(f["body"]) for f in piece)
    order = {f["name"]: i for i, f in enumerate(nodes)}
    return [sorted(u, key=lambda f: order[f["name"]]) for u in units if u]
