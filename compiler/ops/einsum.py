from __future__ import annotations

from dataclasses import dataclass

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.names import c_string
from ...codegen.uses import join
from .. import dtypes as dt
from ..errors import ShapeError
from ..ir import Node
from ._elementwise import check_dtype
from .registry import InferContext, OpDef, register

TYPES = dt.NUMERIC


@dataclass(frozen=True)
class Equation:
    """A parsed einsum equation: one label list per operand and for the output.

    Letters are their own labels; the axes an ellipsis stands for become labels
    ``0``, ``1``, ... counted from the right of the broadcast ellipsis (numpy alignment).
    """
    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]

    @property
    def summed(self) -> list[str]:
        """Labels summed over: in some input but not in the output, in order of appearance."""
        seen: list[str] = []
        for term in self.inputs:
            for label in term:
                if label not in self.output and label not in seen:
                    seen.append(label)
        return seen


def parse(equation: str, ranks: list[int], fail) -> Equation:
    """Parse ``equation`` for inputs of the given ranks (implicit output: ellipsis, then the
    letters used once, sorted)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise fail(f"equation {equation!r} has {len(terms)} operands, the node has {len(ranks)} inputs")
    inputs: list[tuple[str, ...]] = []
    ellipsis_rank = 0
    split = []
    for term, rank in zip(terms, ranks):
        head, dots, tail = term.partition("...")
        letters = head + tail
        if "." in letters or not all(ch.isalpha() and ch.isascii() for ch in letters):
            raise fail(f"equation {equation!r}: term {term!r} is not letters with at most one '...'")
        extra = rank - len(letters)
        if extra < 0 or (extra and not dots):
            raise fail(f"equation {equation!r}: term {term!r} does not match an input of rank {rank}")
        ellipsis_rank = max(ellipsis_rank, extra)
        split.append((head, extra, tail))
    for head, extra, tail in split:
        inputs.append(tuple(head) + tuple(str(i) for i in range(extra - 1, -1, -1)) + tuple(tail))
    dots_labels = tuple(str(i) for i in range(ellipsis_rank - 1, -1, -1))
    if arrow:
        head, dots, tail = rhs.partition("...")
        letters = head + tail
        if "." in letters or not all(ch.isalpha() and ch.isascii() for ch in letters):
            raise fail(f"equation {equation!r}: output {rhs!r} is not letters with at most one '...'")
        if len(set(letters)) != len(letters):
            raise fail(f"equation {equation!r}: output {rhs!r} repeats a letter")
        known = {label for term in inputs for label in term}
        if any(ch not in known for ch in letters):
            raise fail(f"equation {equation!r}: output {rhs!r} uses a letter no input has")
        output = tuple(head) + (dots_labels if dots else ()) + tuple(tail)
    else:
        counts: dict[str, int] = {}
        for term in terms:
            for ch in term.replace("...", ""):
                counts[ch] = counts.get(ch, 0) + 1
        output = dots_labels + tuple(sorted(ch for ch, c in counts.items() if c == 1))
    return Equation(tuple(inputs), output)


@register("Einsum", since=12)
class Einsum(OpDef):
    """Output = sum over the labels not in the output of the product of the inputs (einsum)."""

    def infer(self, node: Node, ctx: InferContext):
        xs = [ctx.inp(i) for i in range(len(node.inputs))]
        if not xs:
            raise ctx.fail("Einsum needs at least one input")
        for x in xs:
            check_dtype(ctx, x.dtype, TYPES)
            if x.dtype != xs[0].dtype:
                raise ctx.fail(f"input types differ: {xs[0].dtype} and {x.dtype}")
        eq = parse(node.attrs["equation"], [len(x.shape) for x in xs], ctx.fail)
        sizes: dict[str, object] = {}
        try:
            for x, term in zip(xs, eq.inputs):
                for label, d in zip(term, x.shape):
                    if label not in sizes:
                        sizes[label] = d
                    elif label.isdigit():
                        sizes[label] = ctx.dims.broadcast(sizes[label], d)
                    else:
                        sizes[label] = ctx.dims.same(sizes[label], d)
        except ShapeError as e:
            raise ctx.fail(f"equation {node.attrs['equation']!r}: {e}") from None
        return [(xs[0].dtype, tuple(sizes[label] for label in eq.output))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        xs = [k.input(i) for i in range(len(node.inputs))]
        y = k.out
        eq = parse(node.attrs["equation"], [x.rank for x in xs], k.unsupported)
        sizes = dict(zip(eq.output, y.dims))
        for x, term in zip(xs, eq.inputs):
            for label, d in zip(term, x.dims):
                if sizes.get(label, 1) == 1:
                    sizes[label] = d
        checks = []
        factors = []
        acc_t = _accumulator(y.dtype)
        for x, term in zip(xs, eq.inputs):
            terms = []
            for label, d, stride in zip(term, x.dims, x.strides):
                size = sizes[label]
                if d == 1:
                    continue
                index = _var(label) if stride == 1 else f"{_var(label)} * {cexpr.lit(stride)}"
                if d != size:  # symbolic: equal to the label's size, or 1 and broadcast
                    checks.append({"cond": f"{cexpr.lit(d)} != {cexpr.lit(size)} && {cexpr.lit(d)} != 1",
                                   "msg": c_string("Einsum: input dims do not match the equation")})
                    index = f"({d} == 1 ? 0 : {index})"
                terms.append(index)
            value = x.load(" + ".join(terms) or "0")
            factors.append(value if acc_t == x.compute else f"({acc_t}){value}")
        def loops(labels):
            return [{"var": _var(label), "size": cexpr.lit(sizes[label])} for label in labels]
        return k.kernel("c/einsum.c.j2", checks=checks, out_loops=loops(eq.output), sum_loops=loops(eq.summed),
                        acc_t=acc_t, product=join(" * ", factors), Y=y.name,
                        store=y.store(f"({y.compute})acc" if acc_t != y.compute else "acc"))


def _var(label: str) -> str:
    """Loop variable of a label: l_a for letter a, e0 for the last ellipsis axis."""
    return f"e{label}" if label.isdigit() else f"l_{label}"


def _accumulator(t: dt.DType) -> str:
    """Sum/product type: the compute type for floats, wrapping unsigned arithmetic for integers."""
    if t.is_float:
        return t.compute
    return "uint64_t" if t.itemsize == 8 else "uint32_t"
