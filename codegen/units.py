"""How a model's node functions are split into translation units that compile in parallel.

Most of a big model's build is the C compiler optimizing node functions and the kernel
helpers they call, one unit on one core. Split, the units build on every core and link
into one library. A kernel family's helpers are compiled in each unit that calls them (but
the GEMM and Winograd helpers, which are helper objects: helper_objects.py), so a family's
nodes stay together where the sizes allow. Small models stay one unit, and a model is never
split into more units than the cores that build it: each unit parses the runtime support and
the SIMD intrinsics' headers again (about a quarter of a second of CPU time) and compiles the
helpers it calls.

The graph unit (``model.c``: the graph's function, a call per node) is compiled without
optimization (toolchain.py, GRAPH_OPT), so a model of many nodes whose node functions are few
(a transformer's layers share theirs) is split too: its graph unit apart, its node functions in
a unit of their own. The graph unit's compile counts as a load on one core when the node
functions are shared out, so that the unit that core builds after it is smaller.
"""
from __future__ import annotations

from typing import Any

# Bytes of node-function source a unit is worth: below this a split costs more (the shared
# helpers parsed again) than it saves.
UNIT_BYTES = 24_000
MAX_UNITS = 8
# From this many nodes up the graph unit is compiled apart. Its function at -O2 takes GCC time
# that grows faster than the nodes (BERT-base's 682 nodes: 3 s of the 4.1 s of its one unit;
# at -O0 the whole unit takes 0.8 s).
GRAPH_UNIT_NODES = 150
# What one node of the graph unit costs the compiler at -O0, in bytes of node-function source
# at the units' -O2 (GPT-2's 1,343 nodes take 1.4 s of CPU, its node functions 17 us a byte).
GRAPH_NODE_BYTES = 60


def split_units(functions: list[dict[str, Any]], jobs: int, graph_nodes: int = 0) -> list[list[dict[str, Any]]]:
    """The node functions in at most ``jobs`` groups, one per extra unit, each in the model's
    order; [] when the model stays one unit. Families go whole to the least loaded unit,
    biggest first; a family larger than a unit's share is cut in the model's order.
    ``graph_nodes``: the nodes the graph unit calls (GRAPH_UNIT_NODES)."""
    nodes = [f for f in functions if f["kind"] == "node"]
    total = sum(len(f["body"]) for f in nodes)
    count = min(jobs, MAX_UNITS, total // UNIT_BYTES)
    graph_apart = graph_nodes >= GRAPH_UNIT_NODES and nodes
    if count < 2 and not graph_apart:
        return []
    graph = graph_nodes * GRAPH_NODE_BYTES if graph_apart else 0
    count = max(1, min(jobs, MAX_UNITS)) if graph_apart else count
    share = (total + graph) / count
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
    loads = [graph] + [0] * (count - 1)   # (the core that builds the graph unit builds units[0] after it)
    for piece in sorted(pieces, key=lambda p: -sum(len(f["body"]) for f in p)):
        k = loads.index(min(loads))
        units[k] += piece
        loads[k] += sum(len(f["body"]) for f in piece)
    order = {f["name"]: i for i, f in enumerate(nodes)}
    return [sorted(u, key=lambda f: order[f["name"]]) for u in units if u]
