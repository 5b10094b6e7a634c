"""Ops whose output is the input's bytes unchanged (Reshape, Flatten, Squeeze, ...)."""
from __future__ import annotations

from ...codegen.kernel import Kernel, KernelContext
from ..ir import Node
from .registry import OpDef


class Copy(OpDef):
    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        return k.kernel("c/copy.c.j2", src=x.name, dst=y.name, ctype=y.ctype, count=y.data()["numel"])
