"""Shared pieces of the sequence and optional ops: checking their inputs and building results.

A sequence value carries its element type and an element shape that only
describes the elements (their real dims travel with them at run time), so
kernels read dims from the sequence, never from the IR.
"""
from __future__ import annotations

from ..errors import UnsupportedError


def sequence_input(ctx, i: int, what: str = "input_sequence"):
    v = ctx.inp(i)
    if v.kind != "sequence":
        raise ctx.fail(f"{what} must be a sequence, not {v.type_str()}")
    return v


def position(ctx, i: int):
    v = ctx.node.input(i)
    if v is None:
        return None
    if v.dtype.name not in ("int32", "int64") or not v.is_tensor:
        raise ctx.fail(f"the position must be an int32 or int64 tensor, not {v.type_str()}")
    return v


def require_rank(node, v) -> None:
    if v.shape is None:
        raise UnsupportedError(f"{node.label}: the rank of the sequence's elements is not known at compile time")
