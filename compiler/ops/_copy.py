"""Ops whose output is the input's bytes unchanged (Reshape, Flatten, Squeeze, ...)."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from ..ir import Node
from .registry import OpDef


class Copy(OpDef):
    def in_place(self, node: Node) -> list[int]:
        """The output's bytes are the input's: written over an input that dies here, the copy
        is skipped."""
        return [0]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        x, y = k.input(0), k.out
        checks = self.checks(node, k)
        if x.numel != y.numel and not k.data_dims:  # symbolic counts (a shape template checks its own)
            checks.append({"cond": f"{cexpr.lit(x.numel)} != {cexpr.lit(y.numel)}",
                           "msg": c_string(f"{node.op_type}: input and output element counts differ")})
        return k.kernel("c/copy.c.j2", src=x.name, dst=y.name, ctype=y.ctype, count=cexpr.lit(y.numel),
                        checks=checks, threads=k.target.threads)

    def checks(self, node: Node, k: KernelContext) -> list[dict[str, str]]:
        """Run-time conditions (C) that make the copy invalid, with their messages."""
        return []


def unit_dim_checks(k: KernelContext, axes: list[int], op: str) -> list[dict[str, str]]:
    """Symbolic input dims at ``axes`` must be 1 when the model runs."""
    x = k.input(0)
    return [{"cond": f"{x.dims[a]} != 1", "msg": c_string(f"{op}: squeezed dim {a} is not 1")}
            for a in axes if isinstance(x.dims[a], str)]
