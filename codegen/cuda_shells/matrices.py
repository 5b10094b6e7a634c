"""Shells of the families built on tiles, windows and sequences: GEMM tiles of a block each
(``onnxc_cuda_gemm_tile``), convolutions, attention, recurrences and transforms. Their C loops'
scratch (packed panels, columns, row buffers, tables) is mostly what a block keeps in shared
memory or a thread in registers instead."""
from __future__ import annotations

from typing import Any

from .. import steps as st
from . import Shell, at, at_least_one, blocks, grid, serial, shell


def _tiles(rows: Any, cols: Any) -> str:
    return f"ONNXC_CUDA_GEMM_TILES({rows}, {cols})"


def _gemm_drops(d: dict[str, Any]) -> list[str]:
    """Operands read in place and results stored as they are made: no packed panel, and no
    converted copy of an operand the tile loads itself or of a result it stores itself."""
    made = [("a", d["a_load"]), ("b", d["b_load"]), ("acc", d["y_store"])]
    return ["scratch_pack"] + [f"scratch_{s}" for s, loaded in made if loaded]


@shell("gemm")
def gemm(d: dict[str, Any]) -> Shell:
    """A block per 64 x 64 tile of Y; a B packed at compile time keeps the C loops."""
    if d["sgemm"] and at(d["sgemm"], "packed"):
        return serial()
    return blocks(_tiles(d["M"], d["N"]), "tiles", drops=_gemm_drops(d))


@shell("matmul")
def matmul(d: dict[str, Any]) -> Shell:
    """A block per 64 x 64 tile of one batch entry; a B packed at compile time keeps the C loops."""
    if d["packed"]:
        return serial()
    batches = " * ".join(str(b) for b in d["batch"]) if d["batch"] else "1"
    return blocks(f"({batches}) * " + _tiles(d["rows"], d["N"]), "tiles", drops=_gemm_drops(d))


@shell("fused_matmul")
def fused_matmul(d: dict[str, Any]) -> Shell:
    if d["packed"]:
        return serial()
    return blocks(_tiles(d["rows"], d["N"]), "tiles", drops=["scratch_pack"])


@shell("conv")
def conv(d: dict[str, Any]) -> Shell:
    """Depthwise: a thread per output element; else a block per GEMM tile of a group's output.
    The weights, columns and accumulators the tile stages or stores itself need no scratch."""
    if d["packed"]:
        return serial()
    made = [("w", d["w_load"]), ("col", not (d["direct"] or d["depthwise"])), ("acc", d["y_store"]),
            ("pack", not d["depthwise"])]
    drops = [f"scratch_{s}" for s, present in made if present]
    if d["depthwise"]:
        return grid(f"({d['N']}) * ({d['M']}) * ({d['OUT']})", "thread_per_output", drops)
    return blocks(f"({d['N']}) * {d['G']} * " + _tiles(d["Mg"], d["OUT"]), "tiles", drops)


@shell("conv_depthwise")
def conv_depthwise(d: dict[str, Any]) -> Shell:
    """A block per channel, its phase planes in shared memory (up to 8192 floats), not in scratch."""
    if d["S0"] * d["S1"] * d["PQ"] > 8192:
        return serial()
    return blocks(d["NC"], "block_per_channel", drops=["scratch_plane"])


@shell("conv_transpose")
def conv_transpose(d: dict[str, Any]) -> Shell:
    """A thread per output element, gathering: no staged copies or columns."""
    made = [("w", d["w_load"]), ("x", d["x_load"]), ("acc", d["y_store"]), ("col", True), ("pack", True)]
    return grid(f"({d['N']}) * ({d['M']}) * ({d['OUT']})", drops=[f"scratch_{s}" for s, present in made if present])


@shell("deform_conv")
def deform_conv(d: dict[str, Any]) -> Shell:
    """A block per GEMM tile, its columns sampled into shared memory: no columns or accumulators."""
    return blocks(f"({d['N']}) * {d['group']} * " + _tiles(d["M"] // d["group"], d["P"]), drops=d["scratch"][:2])


@shell("attention")
def attention(d: dict[str, Any]) -> Shell:
    """A block per query row; its scores in shared memory and registers, not the C row buffers."""
    dims = d["dims"]
    return blocks(f"({at(dims, 'B')}) * ({at(dims, 'Hq')}) * ({at(dims, 'Sq')})", drops=d["scratch"][:2], threads=128)


@shell("linear_attention")
def linear_attention(d: dict[str, Any]) -> Shell:
    """A thread per state column, kept in a local array; a column of more than 1024 floats keeps
    the C loops (and their state and update rows)."""
    if d["dk"] > 1024:
        return serial()
    return grid(f"({d['B']}) * {d['hkv'] * d['dv']}", "thread_per_column", drops=d["scratch"][:2])


@shell("recurrent")
def recurrent(d: dict[str, Any]) -> Shell:
    """A block per sequence, its gates and state in shared memory where they fit (32 KiB); else
    one block, every sequence in turn, in the scratch."""
    hidden = str(d["hidden_size"])
    esize = 8 if d["ct"] == "double" else 4
    if hidden.isdigit() and 0 < int(hidden) and (d["gates"] + 2) * int(hidden) * esize <= 32768:
        rows = 4 if d["kind"] == "gru" and d["linear_before_reset"] else d["gates"]
        want = rows * int(hidden)
        threads = 32 if want <= 32 else (64 if want <= 64 else (128 if want <= 128 else 256))
        return blocks(f"({d['num_directions']} * {d['batch_size']})", "block_per_sequence", threads=threads)
    return blocks(1, "one_block")


def _bins(total: str, d: dict[str, Any]) -> Shell:
    """A thread per frequency bin, the block's threads sharing a table of roots in shared memory
    (not the C build's roots table)."""
    return Shell(st.Launch(at_least_one(total), 256, 256, True), drops=frozenset(d["scratch"][:1]))


@shell("dft")
def dft(d: dict[str, Any]) -> Shell:
    numel = d["outputs"][0]["numel"]
    return _bins(numel if d["irfft"] else f"({numel}) / 2", d)


@shell("stft")
def stft(d: dict[str, Any]) -> Shell:
    return _bins(f"({d['outputs'][0]['numel']}) / 2", d)
