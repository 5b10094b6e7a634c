"""com.microsoft GatherBlockQuantized: the embedding lookup of language models whose table is
quantized to 4 bits (or 8) in blocks along its last axis."""
from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from . import _qlinear as ql
from .registry import InferContext, OpDef, register


@register("GatherBlockQuantized", since=1, domain=ql.MS)
class GatherBlockQuantized(OpDef):
    """Gathers along gather_axis, then y = (q - zero_point) * scale per block of block_size values
    of the last axis. uint8 data packs 8 / bits values a byte, low bits first (the last axis is
    that many times longer), zero point 2^(bits-1) when absent; int4 / uint4 data hold one value
    each, zero point 0 when absent. Like onnxruntime, uint8 data gathers along axis 0 only."""
    formal_inputs = ("data", "indices", "scales", "zero_points")
    formal_outputs = ("output",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"bits": 4, "block_size": 128, "gather_axis": 0, "quantize_axis": 1})
        data, indices, scales = ctx.inp(0), ctx.inp(1), ctx.inp(2)
        a = node.attrs
        rank = len(data.shape)
        if data.dtype not in (dt.UINT8, dt.INT4, dt.UINT4):
            raise UnsupportedError(f"{node.label}: data of type {data.dtype} (onnxc takes uint8, int4, uint4)")
        if data.dtype is dt.UINT8 and a["bits"] not in (4, 8):
            raise ctx.fail(f"bits={a['bits']} must be 4 or 8")
        if rank < 1 or a["quantize_axis"] % rank != rank - 1:
            raise UnsupportedError(f"{node.label}: quantize_axis {a['quantize_axis']} (onnxc takes the last axis)")
        if not -rank <= a["gather_axis"] < rank:
            raise ctx.fail(f"gather_axis {a['gather_axis']} is out of range for rank {rank}")
        if data.dtype is dt.UINT8 and a["gather_axis"] % rank != 0:
            raise ctx.fail("gather_axis must be 0 for uint8 data")
        if indices.dtype not in (dt.INT32, dt.INT64):
            raise ctx.fail(f"indices type {indices.dtype} is not int32 or int64")
        block = a["block_size"]
        if block < 16 or block & (block - 1):
            raise ctx.fail(f"block_size {block} must be a power of 2, at least 16")
        logical = list(data.shape)
        if data.dtype is dt.UINT8:
            logical[-1] = ctx.dims.mul(logical[-1], 8 // a["bits"])
        if scales.dtype is not dt.FLOAT or len(scales.shape) != rank:
            raise ctx.fail(f"scales {scales.dtype}{list(scales.shape)} should be float of rank {rank}")
        for d, s in zip(logical[:-1], scales.shape[:-1]):
            ctx.dims.same(d, s)
        if isinstance(logical[-1], int) and scales.shape[-1] != -(-logical[-1] // block):
            raise ctx.fail(f"scales have {scales.shape[-1]} blocks, the last axis needs {-(-logical[-1] // block)}")
        if ctx.has(3) and ctx.inp(3).dtype != data.dtype:
            raise ctx.fail(f"zero_points type {ctx.inp(3).dtype} differs from data type {data.dtype}")
        g = a["gather_axis"] % rank
        return [(dt.FLOAT, (*logical[:g], *indices.shape, *logical[g + 1:]))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        data, indices, scales = k.input(0), k.input(1), k.input(2)
        a = node.attrs
        rank = data.rank
        g = a["gather_axis"] % rank
        bits = a["bits"] if data.dtype is dt.UINT8 else 8
        logical = list(data.dims)
        logical[-1] = cexpr.mul(logical[-1], 8 // bits)
        blocks = scales.dims[-1]
        if data.dtype is dt.UINT8:
            mask = (1 << bits) - 1
            q = f"(int32_t)(({data.name}[pos * {bits} / 8] >> ((pos * {bits}) % 8)) & {mask})"
            zero = str(1 << (bits - 1))
            if k.has_input(3):
                zp = k.input(3)
                b = f"(blk % {cexpr.lit(blocks)})"
                zero = (f"(int32_t)(({zp.name}[row * {cexpr.lit(zp.dims[-1])} + {b} * {bits} / 8]"
                        f" >> (({b} * {bits}) % 8)) & {mask})")
        else:
            q = data.load("pos")
            zero = k.input(3).load("blk") if k.has_input(3) else "0"
        return k.kernel("c/gather_block_quantized.c.j2", OUTER=cexpr.lit(cexpr.prod(logical[:g])),
                        COUNT=cexpr.lit(indices.numel), G=cexpr.lit(logical[g]),
                        INNER=cexpr.lit(cexpr.prod(logical[g + 1:])), D=cexpr.lit(logical[-1]),
                        BLOCKS=cexpr.lit(blocks), block=a["block_size"], indices=indices.name, y=k.out.name,
                        q=q, zero=zero, scales=scales.name)
