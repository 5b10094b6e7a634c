from ...codegen import cexpr
from .. import dtypes as dt
from ._indexing import data_dim
from ._signal import output_type, scalar_int
from .registry import OpDef, register


@register("MelWeightMatrix", since=17)
class MelWeightMatrix(OpDef):
    """Y[dft_length / 2 + 1, num_mel_bins] = triangular mel filters over the one-sided spectrum."""

    def infer(self, node, ctx):
        mel_bins = scalar_int(ctx, 0, "num_mel_bins")
        length = scalar_int(ctx, 1, "dft_length")
        scalar_int(ctx, 2, "sample_rate")
        for i, what in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")):
            if ctx.inp(i).dtype not in dt.FLOATS:
                raise ctx.fail(f"{what} must be a float scalar, got {ctx.inp(i).dtype}")
        if mel_bins is not None and mel_bins < 0:
            raise ctx.fail(f"num_mel_bins {mel_bins} is negative")
        if length is not None and length < 1:
            raise ctx.fail(f"dft_length {length} must be positive")
        rows = data_dim(ctx, node) if length is None else length // 2 + 1
        cols = data_dim(ctx, node) if mel_bins is None else mel_bins
        return [(output_type(ctx, node, dt.FLOATS + dt.INTS), (rows, cols))]

    def lower(self, node, k):
        y = k.out
        p = {"mel_bins": k.input(0).load("0"), "length": k.input(1).load("0"), "rate": k.input(2).load("0"),
             "lower": k.input(3).load("0"), "upper": k.input(4).load("0")}
        kernel = k.kernel("c/mel.c.j2", p=p, Y=y.name, store=y.store, rows=cexpr.lit(y.dims[0]),
                          cols=cexpr.lit(y.dims[1]))
        if k.data_dims:
            kernel.shape_template = "c/mel_shape.c.j2"
            kernel.shape_data = {"p": p, "spectrum_ptr": k.data_dim_ptr(y.dims[0]),
                                 "mel_ptr": k.data_dim_ptr(y.dims[1])}
        return kernel
