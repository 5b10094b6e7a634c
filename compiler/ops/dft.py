from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import INDEX_TYPES, data_dim
from ._signal import PI, scalar_int
from .registry import OpDef, register


class DFTBase(OpDef):
    """Y = the discrete Fourier transform of X along one signal axis (last dim: 1 real or 2 complex)."""

    def axis(self, node, ctx):
        """The axis as given (may be negative) when known while compiling, else None."""
        raise NotImplementedError

    def axis_expr(self, node, k):
        """The axis as a Python int when known while compiling, else a C expression."""
        raise NotImplementedError

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if x.dtype not in dt.FLOATS:
            raise ctx.fail(f"input must be a float tensor, got {x.dtype}")
        rank = len(x.shape)
        if rank < 2 or x.shape[-1] not in (1, 2):
            raise ctx.fail(f"input must have rank >= 2 and last dim 1 or 2, got shape {x.shape}")
        inverse, onesided = node.attrs.get("inverse", 0), node.attrs.get("onesided", 0)
        irfft = inverse and onesided
        length = scalar_int(ctx, 1, "dft_length") if ctx.has(1) else None
        if length is not None and length < 1:
            raise ctx.fail(f"dft_length {length} must be positive")
        signal = x.shape[:-1]
        out_last = 1 if irfft else 2
        axis = self.axis(node, ctx)
        if axis is None:
            if onesided or ctx.has(1):
                signal = tuple(data_dim(ctx, node) for _ in signal)
            return [(x.dtype, signal + (out_last,))]
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank - 1:
            raise ctx.fail(f"axis {axis} is out of range for input rank {rank}")
        n = signal[axis]
        if ctx.has(1) and length is None:
            m = data_dim(ctx, node)
        else:
            if length is None:
                length = ctx.dims.mul(2, ctx.dims.sub(n, 1)) if irfft else n
            m = ctx.dims.add(ctx.dims.floordiv(length, 2), 1) if onesided and not inverse else length
        return [(x.dtype, signal[:axis] + (m,) + signal[axis + 1:] + (out_last,))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        inverse, onesided = bool(node.attrs.get("inverse", 0)), bool(node.attrs.get("onesided", 0))
        irfft = inverse and onesided
        if k.has_input(1):
            length = "(int64_t)" + k.input(1).name + "[0]"
        else:
            length = "2 * (n - 1)" if irfft else "n"
        axis = self.axis_expr(node, k)
        plan = {"dims": [cexpr.lit(d) for d in x.dims[:-1]], "axis": axis, "length": length,
                "half_spectrum": onesided and not inverse}
        # Scratch holds 6 L doubles; L <= 2 * (output axis dim) when it is not known here.
        if isinstance(axis, str):
            bound = cexpr.mul(2, cexpr.add(*y.dims[:-1]))
        else:
            n = x.dims[axis % x.rank]
            bound = cexpr.mul(2, y.dims[axis % x.rank]) if k.has_input(1) or not isinstance(n, int) else max(
                2 * (n - 1) if irfft else n, 1)
        channels = x.dims[-1]
        element = f"(src + j * inner) * {channels}" if channels != 1 else "src + j * inner"
        kernel = k.kernel("c/dft.c.j2", p=plan, pi=PI, Y=y.name, irfft=irfft, inverse=inverse, channels=channels,
                          load_re=x.load(element), load_im=x.load(f"{element} + 1"), store=y.store)
        kernel.scratch = {"roots": cexpr.mul(48, bound)}
        if k.data_dims:
            kernel.shape_template = "c/dft_shape.c.j2"
            kernel.shape_data = {"p": plan, "per_dim": isinstance(axis, str)}
        return kernel


@register("DFT", since=17, until=19)
class DFT17(DFTBase):
    """DFT with the axis attribute (default 1)."""

    def axis(self, node, ctx):
        return int(node.attrs.get("axis", 1))

    def axis_expr(self, node, k):
        return int(node.attrs.get("axis", 1))


@register("DFT", since=20)
class DFT(DFTBase):
    """DFT with the axis as an optional scalar input (default -2)."""

    def axis(self, node, ctx):
        if not ctx.has(2):
            return -2
        if ctx.inp(2).dtype not in INDEX_TYPES:
            raise ctx.fail("axis must be an int64 scalar")
        value = ctx.const(2)
        return None if value is None else int(value.reshape(-1)[0])

    def axis_expr(self, node, k):
        if not k.has_input(2):
            return -2
        value = k.input(2).value
        return k.input(2).name + "[0]" if value is None else int(value.reshape(-1)[0])
