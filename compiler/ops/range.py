import math

from onnx import TensorProto

from ...codegen import cexpr
from .. import dtypes as dt
from ..errors import UnsupportedError
from ._elementwise import check_dtype
from .registry import OpDef, register

# Longer ranges are an error: their byte count could overflow.
MAX_COUNT = 2**59
STASH_TYPES = {TensorProto.FLOAT: "float", TensorProto.DOUBLE: "double"}


@register("Range", since=11)
class Range(OpDef):
    """output = start, start + delta, ... up to limit (exclusive)."""
    types = (dt.FLOAT, dt.DOUBLE, dt.INT16, dt.INT32, dt.INT64, dt.FLOAT16, dt.BFLOAT16)

    def infer(self, node, ctx):
        start = ctx.inp(0)
        check_dtype(ctx, start.dtype, self.types)
        for i in (0, 1, 2):
            x = ctx.inp(i)
            if x.dtype != start.dtype:
                raise ctx.fail(f"start, limit and delta types differ: {start.dtype} and {x.dtype}")
            if len(x.shape) > 1 or (x.shape and x.shape[0] != 1):
                raise ctx.fail(f"input {i} must be a scalar, not of shape {x.shape}")
        if node.attrs.get("stash_type", TensorProto.FLOAT) not in STASH_TYPES:
            raise UnsupportedError(f"{node.label}: stash_type {node.attrs['stash_type']} is not supported")
        values = [ctx.const(i) for i in (0, 1, 2)]
        if any(v is None for v in values):
            return [(start.dtype, (self._symbolic_count(ctx) or ctx.dims.data(node.name or "Range"),))]
        s, l, d = (v.reshape(-1)[0].item() for v in values)
        if d == 0:
            raise ctx.fail("delta is zero")
        if start.dtype.is_int:
            count = -((s - l) // d)
        else:
            span = (float(l) - float(s)) / float(d)
            if not math.isfinite(span):
                raise ctx.fail(f"the length of range({s}, {l}, {d}) is not finite")
            count = math.ceil(span)
        if count > MAX_COUNT:
            raise ctx.fail(f"range({s}, {l}, {d}) has too many elements")
        return [(start.dtype, (max(count, 0),))]

    @staticmethod
    def _symbolic_count(ctx):
        """max(ceil((limit - start) / delta), 0) when the bounds are known dims and delta a positive int."""
        if not ctx.inp(0).dtype.is_int:
            return None
        bounds = [ctx.sym_value(i) for i in (0, 1, 2)]
        if any(b is None or len(b) != 1 for b in bounds):
            return None
        (s,), (limit,), (d,) = bounds
        if not isinstance(d, int) or d <= 0:
            return None
        return ctx.dims.expr("max", ctx.dims.ceildiv(ctx.dims.sub(limit, s), d), 0)

    def lower(self, node, k):
        start, limit, delta, y = k.input(0), k.input(1), k.input(2), k.out
        integer = y.dtype.is_int
        compute = y.compute
        if y.dtype in (dt.FLOAT16, dt.BFLOAT16):
            compute = STASH_TYPES[node.attrs.get("stash_type", TensorProto.FLOAT)]
        data = {"integer": integer, "start": start.load("0"), "limit": limit.load("0"), "delta": delta.load("0")}
        kernel = k.kernel("c/range.c.j2", **data, output=y.name, ctype=y.ctype, compute=compute,
                          count=cexpr.lit(y.numel), value=y.store(f"begin + ({compute})i * step"))
        if k.data_dims:
            kernel.shape_template = "c/range_shape.c.j2"
            kernel.shape_data = data | {"max_count": cexpr.lit(MAX_COUNT)}
        return kernel
