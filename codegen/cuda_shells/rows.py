"""Shells of the families that fold rows, planes or whole tensors: a thread per row where rows are
short or strided, a block per row where its threads can share the row's work and merge it, one
block where the result depends on every element (no barrier spans blocks)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import Shell, at, blocks, grid, is_const, one_block, shell


def _long(n: Any) -> bool:
    """A row worth a block: its length unknown when compiling, or at least 64."""
    return not (is_const(n) and int(str(n)) < 64)


@shell("arg_reduce")
def arg_reduce(d: dict[str, Any]) -> Shell:
    if d["inner"] == "1" and _long(d["n"]):
        return blocks(d["outer"], "block_per_row")
    return grid(f"({d['outer']} * {d['inner']})", "thread_per_output")


@shell("batch_norm")
def batch_norm(d: dict[str, Any]) -> Shell:
    """Training sums each channel: a block per channel; inference maps each element."""
    if d["training"]:
        return blocks(d["C"], "block_per_channel")
    return grid(f"({d['N']} * {d['C']} * {d['S']})", "thread_per_element")


@shell("cumulative")
def cumulative(d: dict[str, Any]) -> Shell:
    """A thread per line; sized for the elements when the axis is read at run time."""
    return grid("(" + (" * ".join(str(x) for x in d["dims"]) if d["runtime"] else f"{d['outer']} * {d['inner']}") + ")")


@shell("det")
def det(d: dict[str, Any]) -> Shell:
    """A thread per matrix of at most 8 x 8 (in its own array); a block per matrix that fits in
    shared memory; else one block, every matrix in turn, in the C build's scratch for one matrix."""
    n = str(d["n"])
    known = n.isdigit() and int(n) > 0
    if known and int(n) <= 8:
        return grid(f"({d['batch']})", "thread_per_matrix", drops=["scratch_lu"])
    if known and int(n) * int(n) * 8 <= 24576:
        want = int(n) * int(n)
        threads = 64 if want <= 64 else (128 if want <= 128 else 256)
        return blocks(f"({d['batch']})", "block_per_matrix", drops=["scratch_lu"], threads=threads)
    return one_block("one_block")


@shell("dynamic_quantize")
def dynamic_quantize(d: dict[str, Any]) -> Shell:
    """The scale depends on the whole tensor: one block."""
    return one_block(threads=1024)


@shell("einsum")
def einsum(d: dict[str, Any]) -> Shell:
    """A thread per output element; one block summing every term into a scalar output."""
    if d["out_loops"]:
        total = " * ".join(f"({at(loop, 'size')})" for loop in d["out_loops"])
        return grid(f"({total})", "thread_per_output")
    return one_block("one_block")


@shell("global_pool")
def global_pool(d: dict[str, Any]) -> Shell:
    if _long(d["IN"]):
        return blocks(d["NC"], "block_per_plane")
    return grid(d["NC"], "thread_per_plane")


@shell("loss")
def loss(d: dict[str, Any]) -> Shell:
    """A thread per sample; one block when the losses are summed."""
    if d["reduction"] == "none":
        return grid(f"({d['N']}) * ({d['D']})")
    return one_block()


@shell("lp_norm")
def lp_norm(d: dict[str, Any]) -> Shell:
    if d["inner"] == "1":
        return blocks(d["outer"], "block_per_row")
    return grid(f"({d['outer']} * {d['inner']})", "thread_per_row")


@shell("max_unpool")
def max_unpool(d: dict[str, Any]) -> Shell:
    """The zeros before every write: one block."""
    return one_block(threads=1024)


@shell("normalization")
def normalization(d: dict[str, Any]) -> Shell:
    return blocks(f"({d['N']} * {d['G']})")


@shell("normalizer")
def normalizer(d: dict[str, Any]) -> Shell:
    """A thread per short row (a constant of at most 64), else a block per row."""
    if is_const(d["n"]) and int(str(d["n"])) <= 64:
        return grid(d["rows"], "thread_per_row")
    return blocks(d["rows"], "block_per_row")


def _merge(p: Any) -> str:
    """How two partial accumulators ``a`` and ``b`` of an accumulating pass merge ("" if the
    combine is none known): the combine is the pass's last line, ``acc = COMBINE;``, read without
    parentheses and casts; integer sums and products wrap around in the unsigned type."""
    head, body = at(p, "head"), at(p, "body")
    if not (head and len(body) == 2 and body[1].startswith("acc = ")):
        return ""
    acc_type = head[0].split(" ")[0]
    tokens = [t for t in body[1][6:-1].replace("(", " ").replace(")", " ").split()
              if not (t.endswith("_t") or t in ("float", "double", "bool"))]
    if tokens[:2] in (["acc", "+"], ["acc", "*"]) and "acc" not in tokens[2:]:
        if acc_type.startswith("int"):
            return f"({acc_type})((u{acc_type})a {tokens[1]} (u{acc_type})b)"
        return f"a {tokens[1]} b"
    if tokens in (["x", op, "acc", "||", "x", "!=", "x", "?", "x", ":", "acc"] for op in (">", "<")):
        return f"(b {tokens[1]} a || b != b) ? b : a"
    if tokens in (["x", op, "acc", "?", "x", ":", "acc"] for op in (">", "<")):
        return f"b {tokens[1]} a ? b : a"
    if tokens in (["acc", op, "x"] for op in ("|", "&")):
        return f"a {tokens[1]} b"
    return ""


@shell("reduce")
def reduce(d: dict[str, Any]) -> Shell:
    """A block per output where each reduces one long contiguous run of inputs and every
    accumulating pass merges (``merges``, in pass order); else a thread per output."""
    dims, o_all = d["dims"], d["o_all"]
    merges = [_merge(p) for p in d["passes"] if at(p, "kind") == "inputs" and at(p, "head")]
    one_run = (len(dims) == 1 and o_all == "0") or (len(dims) == 2 and o_all == "i0")
    if not d["runtime"] and one_run and _long(dims[-1]) and "" not in merges:
        return replace(blocks(d["out_numel"], "block_per_output"), details={"merges": merges})
    return grid(d["out_numel"], "thread_per_output" if not d["runtime"] else "runtime_axes")


@shell("scatter_elements")
def scatter_elements(d: dict[str, Any]) -> Shell:
    """The copy before the updates in order: one block."""
    return one_block()


@shell("scatter_nd")
def scatter_nd(d: dict[str, Any]) -> Shell:
    """The copy before the updates in order: one block."""
    return one_block()


@shell("softmax")
def softmax(d: dict[str, Any]) -> Shell:
    if d["inner"] == "1":
        return blocks(d["outer"], "block_per_row")
    return grid(f"({d['outer']} * {d['inner']})", "thread_per_row")


@shell("top_k")
def top_k(d: dict[str, Any]) -> Shell:
    """A thread per short row (at most 64), else a block per row; no heap of the C build."""
    rows, heap = f"({d['outer']}) * ({d['inner']})", [d["scratch"][0]]
    if is_const(d["n"]) and int(str(d["n"])) <= 64:
        return grid(rows, "thread_per_row", drops=heap)
    return blocks(rows, "block_per_row", drops=heap)
