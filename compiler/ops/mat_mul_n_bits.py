"""com.microsoft MatMulNBits: language models' MatMul with weights quantized to 4 (or 8) bits
in blocks along K, as onnxruntime's MatMulNBitsQuantizer writes them."""
from __future__ import annotations

from dataclasses import replace

from ...codegen.kernel import Kernel, KernelContext
from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from . import _gemm
from . import _qlinear as ql
from .mat_mul import matmul_kernel
from .registry import InferContext, OpDef, register


@register("MatMulNBits", since=1, domain=ql.MS)
class MatMulNBits(OpDef):
    """Y = A @ dequantize(B)^T + bias. B [N, k_blocks, block_size * bits / 8] packs each row's
    values low bits first; w = (q - zero_point) * scale per block, the zero point 2^(bits-1)
    when absent (or one float per block). The product is computed in float32 whatever
    accuracy_level asks: onnxruntime's level 4 quantizes A to int8 per block, onnxc does not."""
    formal_inputs = ("A", "B", "scales", "zero_points", "g_idx", "bias")
    formal_outputs = ("Y",)

    def infer(self, node: Node, ctx: InferContext):
        ql.attributes(node, ctx, {"K": None, "N": None, "bits": 4, "block_size": None, "accuracy_level": 0,
                                  "weight_prepacked": 0})
        a, b = ctx.inp(0), ctx.inp(1)
        attrs = node.attrs
        for name in ("K", "N", "block_size"):
            if attrs[name] is None:
                raise ctx.fail(f"required attribute {name!r} is missing")
        k, n, bits, block = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
        if a.dtype is not dt.FLOAT:
            raise UnsupportedError(f"{node.label}: A of type {a.dtype} (onnxc takes float32 A)")
        if bits not in (4, 8):
            raise ctx.fail(f"bits={bits}: onnxc packs 4 or 8 bits")
        if block < 16 or block & (block - 1):
            raise ctx.fail(f"block_size {block} must be a power of 2, at least 16")
        if attrs["weight_prepacked"] or ctx.has(4):
            raise UnsupportedError(f"{node.label}: prepacked weights and g_idx are not supported")
        blocks = -(-k // block)
        if b.dtype is not dt.UINT8 or tuple(b.shape) != (n, blocks, block * bits // 8):
            raise ctx.fail(f"B {b.dtype}{list(b.shape)} should be uint8[{n}, {blocks}, {block * bits // 8}]")
        if ctx.inp(2).dtype is not dt.FLOAT or ctx.inp(2).shape not in ((n * blocks,), (n, blocks)):
            raise ctx.fail(f"scales {list(ctx.inp(2).shape)} should be float[{n * blocks}]")
        if ctx.has(3):
            zp = ctx.inp(3)
            packed = (n * -(-blocks * bits // 8),)
            if not ((zp.dtype is dt.UINT8 and tuple(zp.shape) in (packed, (n, -(-blocks * bits // 8))))
                    or (zp.dtype is dt.FLOAT and tuple(zp.shape) in ((n * blocks,), (n, blocks)))):
                raise ctx.fail(f"zero_points {zp.dtype}{list(zp.shape)} should be uint8{list(packed)} "
                               f"or float[{n * blocks}]")
        if ctx.has(5) and (ctx.inp(5).dtype is not dt.FLOAT or tuple(ctx.inp(5).shape) != (n,)):
            raise ctx.fail(f"bias {list(ctx.inp(5).shape)} should be float[{n}]")
        if not a.shape:
            raise ctx.fail("A must have at least one dim")
        ctx.dims.same(a.shape[-1], k)
        return [(dt.FLOAT, (*a.shape[:-1], n))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        a, b, y = k.input(0), k.input(1), k.out
        kk, n, bits, block = (node.attrs[name] for name in ("K", "N", "bits", "block_size"))
        blocks = -(-kk // block)
        mask = (1 << bits) - 1
        element = f"(k % {block})"
        blk = f"(n * {blocks} + k / {block})"
        q = f"(({b.name}[{blk} * {block * bits // 8} + {element} * {bits} / 8] >> (({element} * {bits}) % 8)) & {mask})"
        zero = f"{float(1 << (bits - 1))!r}f"
        if k.has_input(3):
            zp = k.input(3)
            if zp.dtype is dt.FLOAT:
                zero = f"{zp.name}[{blk}]"
            else:
                row = -(-blocks * bits // 8)
                kb = f"(k / {block})"
                zero = f"(float)(({zp.name}[n * {row} + {kb} * {bits} / 8] >> (({kb} * {bits}) % 8)) & {mask})"
        b_load = f"((float){q} - {zero}) * {k.input(2).name}[{blk}]"
        # B seen as the K x N float matrix it holds; the kernel fills a dequantized copy.
        weights = replace(b, dtype=dt.FLOAT, shape=(kk, n), dims=[kk, n], value=None)
        operands = KernelContext(node, [a, weights], [y], k.dim, k.data_dims, k.target, k.uses)
        operands.constants = k.constants
        y_store = f"y[i] + {k.input(5).name}[i % {n}]" if k.has_input(5) else None
        return matmul_kernel(operands, _gemm.FLOAT, a_load=None, b_load=b_load, y_store=y_store)
