from .. import dtypes as dt
from ._indexing import data_dims
from .registry import OpDef, register

# pixel_format -> channels of the output
CHANNELS = {"RGB": 3, "BGR": 3, "Grayscale": 1}
# The system libraries the decoders call (codegen/system_libraries.py)
LIBRARIES = ("libjpeg", "libpng", "libwebp", "libtiff", "libopenjp2")


@register("ImageDecoder", since=20)
class ImageDecoder(OpDef):
    """Y[H, W, C] = the image encoded in X (JPEG, PNG, WebP, TIFF, JPEG 2000, BMP or PNM, told
    apart by their first bytes), decoded as Pillow decodes it: RGB, BGR, or Grayscale by
    Pillow's luma weights. The dims are known once it is decoded, so the kernel allocates Y.
    Decoding links the system's image libraries: native and CUDA builds only."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if x.dtype != dt.UINT8 or len(x.shape) != 1:
            raise ctx.fail(f"the encoded stream must be a 1-D uint8 tensor, not {x.type_str()}")
        pixel_format = node.attrs["pixel_format"]
        if pixel_format not in CHANNELS:
            raise ctx.fail(f"pixel_format must be one of {', '.join(CHANNELS)}, not {pixel_format!r}")
        height, width = data_dims(ctx, node, 2)
        return [(dt.UINT8, (height, width, CHANNELS[pixel_format]))]

    def lower(self, node, k):
        if not k.target.system_libraries:
            raise k.unsupported("a --target c package cannot decode images: that needs the system's image "
                                "libraries (libjpeg, libpng, libwebp, libtiff, OpenJPEG), which it does not link")
        kernel = k.kernel("c/image_decoder.c.j2", ("c/helpers/image_decoder.c.j2",), allocates=True,
                          X=k.input(0).data(),
                          Y={"name": k.out.name, "dims": k.output_dims(0)}, pixel_format=node.attrs["pixel_format"])
        kernel.libraries = list(LIBRARIES)
        return kernel
