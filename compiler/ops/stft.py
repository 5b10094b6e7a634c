from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import data_dim
from ._signal import PI, scalar_int
from .registry import OpDef, register


@register("STFT", since=17)
class STFT(OpDef):
    """output[b, f, k] = frequency k of the DFT of frame f of signal b (frame_step apart, times the window)."""

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if x.dtype not in dt.FLOATS:
            raise ctx.fail(f"signal must be a float tensor, got {x.dtype}")
        if len(x.shape) != 3 or x.shape[2] not in (1, 2):
            raise ctx.fail(f"signal must be [batch, length, 1 or 2], got {x.shape}")
        step = scalar_int(ctx, 1, "frame_step")
        if step is not None and step < 1:
            raise ctx.fail(f"frame_step {step} must be positive")
        window = None
        if ctx.has(2):
            w = ctx.inp(2)
            if w.dtype != x.dtype or len(w.shape) != 1:
                raise ctx.fail(f"window must be a 1-D {x.dtype} tensor, got {w.type_str()}")
            window = w.shape[0]
        if ctx.has(3):
            length = scalar_int(ctx, 3, "frame_length")
            if length is not None and isinstance(window, int) and length != window:
                raise ctx.fail(f"frame_length {length} differs from the window length {window}")
        else:
            length = window if window is not None else x.shape[1]
        if isinstance(length, int) and isinstance(x.shape[1], int) and not 1 <= length <= x.shape[1]:
            raise ctx.fail(f"frame_length {length} must be in [1, {x.shape[1]}]")
        if length is None:
            frames, bins = data_dim(ctx, node), data_dim(ctx, node)
        else:
            frames = data_dim(ctx, node) if step is None else \
                ctx.dims.add(ctx.dims.floordiv(ctx.dims.sub(x.shape[1], length), step), 1)
            bins = ctx.dims.add(ctx.dims.floordiv(length, 2), 1) if node.attrs.get("onesided", 1) else length
        return [(x.dtype, (x.shape[0], frames, bins, 2))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        if k.has_input(3):
            length = "(int64_t)" + k.input(3).name + "[0]"
        else:
            length = cexpr.lit(k.input(2).dims[0] if k.has_input(2) else x.dims[1])
        plan = {"length": length, "step": "(int64_t)" + k.input(1).name + "[0]", "signal": cexpr.lit(x.dims[1]),
                "window_length": cexpr.lit(k.input(2).dims[0]) if k.has_input(2) and k.has_input(3) else None,
                "onesided": bool(node.attrs.get("onesided", 1))}
        window = f"(double){k.input(2).load('j')}" if k.has_input(2) else "1.0"
        kernel = k.kernel("c/stft.c.j2", p=plan, pi=PI, Y=y.name, batch=cexpr.lit(x.dims[0]), channels=x.dims[2],
                          load=x.load("{}"), window=window, store=y.store, frames=cexpr.lit(y.dims[1]),
                          bins=cexpr.lit(y.dims[2]))
        # L is at most the signal length (checked before any use).
        kernel.scratch = {"roots": cexpr.mul(48, x.dims[1])}
        if k.data_dims:
            kernel.shape_template = "c/stft_shape.c.j2"
            kernel.shape_data = {"p": plan, "frames_ptr": k.data_dim_ptr(y.dims[1]),
                                 "bins_ptr": k.data_dim_ptr(y.dims[2])}
        return kernel
