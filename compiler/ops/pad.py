from typing import Optional

from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import (
    check_index_type,
    const_ints,
    data_dim,
    data_dim_ptrs,
    data_dims,
    norm_axes,
    scalar_literal,
    vector_len,
)
from .registry import OpDef, register

MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


class PadBase(OpDef):
    """Shared by both Pad versions: Y = X padded (or cropped, for negative pads) per axis."""

    def pads(self, node, const) -> tuple[Optional[list[int]], Optional[list[int]]]:
        """(pads, axes) as ints, None where computed at run time; ``const(i)`` reads input i."""
        raise NotImplementedError

    def infer(self, node, ctx):
        x = ctx.inp(0)
        rank = len(x.shape)
        if node.attrs.get("mode", "constant") not in MODES:
            raise ctx.fail(f"unknown mode {node.attrs['mode']!r}")
        self.check_inputs(node, ctx)
        pads, axes = self.pads(node, lambda i: const_ints(ctx, i) if ctx.has(i) else ())
        if axes is None:
            return [(x.dtype, tuple(data_dims(ctx, node, rank)))]
        axes = norm_axes(ctx, axes, rank) if axes != () else list(range(rank))
        if pads is None:
            out = list(x.shape)
            for a in axes:
                out[a] = data_dim(ctx, node)
            return [(x.dtype, tuple(out))]
        if len(pads) != 2 * len(axes):
            raise ctx.fail(f"pads has {len(pads)} entries for {len(axes)} axes")
        out = list(x.shape)
        for i, a in enumerate(axes):
            total = pads[i] + pads[i + len(axes)]
            if isinstance(out[a], int) and out[a] + total < 0:
                raise ctx.fail(f"pads {pads} leave a negative dim on axis {a}")
            out[a] = ctx.dims.add(out[a], total)
        return [(x.dtype, tuple(out))]

    def check_inputs(self, node, ctx) -> None:
        pass

    def value(self, node, k) -> str:
        """C initializer of the pad value, in the storage type."""
        raise NotImplementedError

    def lower(self, node, k):
        x, y = k.input(0), k.out
        mode = MODES[node.attrs.get("mode", "constant")]
        pads, axes = self.pads(node, lambda i: _ints(k.input(i).value) if k.has_input(i) else ())
        if axes == ():
            axes = list(range(x.rank))
        begin: Optional[list[int]] = None
        if pads is not None and axes is not None:
            begin = [0] * x.rank
            for i, a in enumerate(axes):
                begin[a % x.rank] = pads[i]
        padded = [a for a in range(x.rank) if begin is None or begin[a] != 0 or y.dims[a] != x.dims[a]]
        maps, offset = [], 0
        for a in padded:
            maps.append({"axis": a, "offset": cexpr.lit(offset), "out_dim": cexpr.lit(y.dims[a]),
                         "in_dim": cexpr.lit(x.dims[a]), "begin": f"pad_begin[{a}]" if begin is None else begin[a]})
            offset = cexpr.add(offset, y.dims[a])
        loops = [{"n": cexpr.lit(od), "stride": cexpr.lit(s), "mapped": a in padded}
                 for a, (od, s) in enumerate(zip(y.dims, x.strides))]
        runtime = {} if begin is not None else {
            "num_axes": k.input(1).dims[0] // 2, "pads": k.input(1).name,
            "axes": k.input(3).name if k.has_input(3) else ""}
        kernel = k.kernel("c/pad.c.j2", helpers=("c/helpers/pad_map.c.j2",) if maps else (), src=x.name,
                          dst=y.name, ctype=y.ctype, rank=x.rank, mode=mode, value=self.value(node, k), maps=maps,
                          loops=loops, runtime=runtime, inside=[f"s{a} >= 0" for a in padded] if mode == 0 else [])
        if maps:
            kernel.scratch = {"map": cexpr.mul(8, offset)}
        if k.data_dims:
            kernel.shape_template = "c/pad_shape.c.j2"
            kernel.shape_data = runtime | {"in_dims": [cexpr.lit(d) for d in x.dims], "dim_ptrs": data_dim_ptrs(k, y)}
        return kernel


def _ints(value) -> Optional[list[int]]:
    return None if value is None else [int(v) for v in value.reshape(-1)]


@register("Pad", since=1, until=1)
class Pad1(PadBase):
    """Y = X padded by the paddings attribute ([x1_begin, x2_begin, ..., x1_end, x2_end, ...])
    with value (constant mode), reflection or edge values."""

    def pads(self, node, const):
        return list(node.attrs.get("paddings", ())), ()

    def check_inputs(self, node, ctx):
        if node.attrs["mode"] == "wrap":
            raise ctx.fail("mode 'wrap' arrived at Pad-19; Pad-1 has constant, reflect and edge")
        if len(node.attrs["paddings"]) != 2 * len(ctx.inp(0).shape):
            raise ctx.fail(f"paddings has {len(node.attrs['paddings'])} entries for rank {len(ctx.inp(0).shape)}")

    def value(self, node, k):
        return k.out.store(scalar_literal(node.attrs.get("value", 0.0), k.out.dtype))


@register("Pad", since=2, until=10)
class Pad2(PadBase):
    """Y = X padded by the pads attribute with value (constant mode), reflection or edge values."""

    def pads(self, node, const):
        return list(node.attrs.get("pads", ())), ()

    def check_inputs(self, node, ctx):
        if "pads" not in node.attrs:
            raise ctx.fail("the pads attribute is required")

    def value(self, node, k):
        return k.out.store(scalar_literal(node.attrs.get("value", 0.0), k.out.dtype))


@register("Pad", since=11)
class Pad(PadBase):
    """Y = X padded by the pads input (on the axes input's axes) with constant_value, reflection, edge or wrap."""

    def pads(self, node, const):
        return const(1), const(3)

    def check_inputs(self, node, ctx):
        check_index_type(ctx, ctx.inp(1).dtype, "pads", (dt.INT64,))
        n = vector_len(ctx, 1, "pads")
        if ctx.has(3):
            check_index_type(ctx, ctx.inp(3).dtype, "axes")
            if 2 * vector_len(ctx, 3, "axes") != n:
                raise ctx.fail(f"pads has {n} entries for {ctx.inp(3).shape[0]} axes")
        elif n != 2 * len(ctx.inp(0).shape):
            raise ctx.fail(f"pads has {n} entries for rank {len(ctx.inp(0).shape)}")
        if ctx.has(2) and (ctx.inp(2).dtype != ctx.inp(0).dtype or ctx.inp(2).shape not in ((), (1,))):
            raise ctx.fail("constant_value must be a scalar of the data type")

    def value(self, node, k):
        return k.input(2).name + "[0]" if k.has_input(2) else "0"   # (a use only where the template writes it)
