"""ImageDecoder against Pillow's decode (the operator's reference): every format and pixel format,
and malformed, truncated, huge and random bytes, which fail the run with a message."""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxc
from helpers import make_model
from onnxc.compiler.ops.image_decoder import LIBRARIES
from tools import require_module, require_system_libraries

U8 = TensorProto.UINT8
PIXEL_FORMATS = ("RGB", "BGR", "Grayscale")
rng = np.random.default_rng(7)


@pytest.fixture(scope="module")
def pil():
    require_system_libraries(LIBRARIES)
    return require_module("PIL.Image")


def decoder_model(name: str = "decode", pixel_formats=PIXEL_FORMATS):
    """One ImageDecoder per pixel format on the same bytes, of a length known at run time."""
    nodes = [helper.make_node("ImageDecoder", ["encoded"], [f"y_{f}"], name=f"{name}_{f}", pixel_format=f)
             for f in pixel_formats]
    outputs = [(f"y_{f}", U8, ["h", "w", 1 if f == "Grayscale" else 3]) for f in pixel_formats]
    return make_model(nodes, [("encoded", U8, ["n"])], outputs, opset=20)


@pytest.fixture(scope="module")
def session(pil):
    return onnxc.InferenceSession(decoder_model().SerializeToString())


def pillow_outputs(pil, data: bytes) -> list[np.ndarray]:
    """What the reference gives for an RGB image (as Pillow converts other modes to RGB)."""
    rgb = np.array(pil.open(io.BytesIO(data)).convert("RGB"))
    gray = np.array(pil.open(io.BytesIO(data)).convert("L"))[:, :, None]
    return [rgb, rgb[:, :, ::-1], gray]


def encoded(pil, array: np.ndarray, fmt: str, mode: str | None = None, **options) -> bytes:
    image = pil.fromarray(array)
    if mode is not None:
        image = image.convert(mode)
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


RGB = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
RGBA = rng.integers(0, 256, (23, 31, 4), dtype=np.uint8)
GRAY = rng.integers(0, 256, (29, 17), dtype=np.uint8)

# (format, source array, Pillow mode to save, save options)
IMAGES = {
    "jpeg": ("JPEG", RGB, None, {}),
    "jpeg_444_q95": ("JPEG", RGB, None, {"quality": 95, "subsampling": 0}),
    "jpeg_progressive": ("JPEG", RGB, None, {"progressive": True}),
    "jpeg_gray": ("JPEG", GRAY, None, {}),
    "png": ("PNG", RGB, None, {}),
    "png_gray": ("PNG", GRAY, None, {}),
    "png_rgba": ("PNG", RGBA, None, {}),
    "png_palette": ("PNG", RGB, "P", {}),
    "png_bilevel": ("PNG", GRAY, "1", {}),
    "png_gray_16_bit": ("PNG", (GRAY.astype(np.uint16) * 3), None, {}),
    "webp": ("WEBP", RGB, None, {}),
    "webp_lossless": ("WEBP", RGB, None, {"lossless": True}),
    "webp_rgba": ("WEBP", RGBA, None, {}),
    "tiff": ("TIFF", RGB, None, {}),
    "tiff_lzw": ("TIFF", RGB, None, {"compression": "tiff_lzw"}),
    "tiff_deflate": ("TIFF", RGB, None, {"compression": "tiff_adobe_deflate"}),
    "tiff_rgba": ("TIFF", RGBA, None, {}),
    "tiff_gray": ("TIFF", GRAY, None, {}),
    "tiff_palette": ("TIFF", RGB, "P", {}),
    **{f"tiff_orientation_{o}": ("TIFF", RGB, None, {"tiffinfo": {274: o}}) for o in range(2, 9)},
    "jp2": ("JPEG2000", RGB, None, {}),
    "j2k": ("JPEG2000", RGB, None, {"no_jp2": True}),
    "jp2_gray": ("JPEG2000", GRAY, None, {}),
    "bmp": ("BMP", RGB, None, {}),
    "bmp_gray": ("BMP", GRAY, None, {}),
    "bmp_palette": ("BMP", RGB, "P", {}),
    "bmp_bilevel": ("BMP", GRAY, "1", {}),
    "ppm": ("PPM", RGB, None, {}),
    "pgm": ("PPM", GRAY, None, {}),
    "pbm": ("PPM", GRAY, "1", {}),
}

# PNM variants Pillow reads but does not write
PNM = {
    "ppm_maxval_100": b"P6\n5 4\n100\n" + rng.integers(0, 101, 60).astype(np.uint8).tobytes(),
    "ppm_16_bit": b"P6\n# a comment\n5 4\n1000\n" + rng.integers(0, 1001, 60).astype(">u2").tobytes(),
    "pgm_16_bit": b"P5\n6 1\n1000\n" + np.array([0, 1, 2, 3, 200, 1000], ">u2").tobytes(),
    "pgm_plain_16_bit": b"P2\n6 1\n65535\n0 1 2 3 200 65535\n",
    "ppm_plain": b"P3\n2 2\n100\n1 2 3 100 50 0\n7 8 9 10 11 12\n",
    "pgm_plain": b"P2 3 1 10 0 5 10",
    "pbm_plain": b"P1\n3 2\n1 0 1\n011\n",
}


@pytest.mark.parametrize("name", list(IMAGES) + list(PNM))
def test_decodes_like_pillow(name, pil, session):
    data = PNM[name] if name in PNM else encoded(pil, IMAGES[name][1], IMAGES[name][0], IMAGES[name][2],
                                                 **IMAGES[name][3])
    got = session.run(None, {"encoded": np.frombuffer(data, np.uint8)})
    for pixel_format, g, want in zip(PIXEL_FORMATS, got, pillow_outputs(pil, data)):
        assert g.dtype == np.uint8 and g.shape == want.shape, pixel_format
        np.testing.assert_array_equal(g, want, err_msg=pixel_format)


def test_the_decoded_dims_reach_later_nodes(pil):
    """H and W are known once decoded: a Shape of the output and an op on it read them."""
    nodes = [helper.make_node("ImageDecoder", ["encoded"], ["y"]),
             helper.make_node("Shape", ["y"], ["shape"]),
             helper.make_node("Cast", ["y"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("ReduceMean", ["f"], ["mean"], keepdims=0)]
    model = make_model(nodes, [("encoded", U8, ["n"])], [("shape", TensorProto.INT64, [3]),
                                                          ("mean", TensorProto.FLOAT, [])], opset=20)
    sess = onnxc.InferenceSession(model.SerializeToString())
    for array in (RGB, GRAY):
        data = encoded(pil, array, "PNG")
        shape, mean = sess.run(None, {"encoded": np.frombuffer(data, np.uint8)})
        rgb = np.array(pil.open(io.BytesIO(data)).convert("RGB"))
        np.testing.assert_array_equal(shape, rgb.shape)
        np.testing.assert_allclose(mean, rgb.astype(np.float32).mean(), rtol=1e-5)


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def huge_png() -> bytes:
    """A valid PNG header of 100000 x 100000 pixels, then a tiny image stream."""
    header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + png_chunk(b"IDAT", zlib.compress(b"\0" * 64)) + png_chunk(b"IEND", b"")


def huge_jpeg(pil) -> bytes:
    """A JPEG whose frame header says 65000 x 65000 pixels (its data is for 8 x 8)."""
    data = bytearray(encoded(pil, RGB[:8, :8], "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", 65000, 65000)
    return bytes(data)


def huge_bmp() -> bytes:
    info = struct.pack("<IiiHHIIiiII", 40, 70000, 70000, 1, 24, 0, 0, 0, 0, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + 12, 0, 0, 54) + info + b"\0" * 12


def malformed(pil) -> dict[str, tuple[bytes, str]]:
    """Bytes that must fail the run, and what the message says."""
    cases: dict[str, tuple[bytes, str]] = {
        "empty": (b"", "not a JPEG, PNG"),
        "unknown format": (b"GIF89a" + bytes(40), "not a JPEG, PNG"),
        "huge png": (huge_png(), "PNG"),
        "huge jpeg": (huge_jpeg(pil), "larger than"),
        "huge bmp": (huge_bmp(), "larger than"),
        "huge pnm": (b"P6\n70000 70000\n255\n" + bytes(16), "larger than"),
        "pnm no dims": (b"P6\n# nothing\n", "malformed header"),
        "pnm maxval 0": (b"P5\n2 2\n0\n" + bytes(4), "maximum sample value"),
        "bmp compressed": (b"BM" + struct.pack("<IHHI", 70, 0, 0, 54)
                           + struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 8, 1, 0, 0, 0, 0, 0) + bytes(16),
                           "uncompressed"),
        "webp header only": (b"RIFF\x10\0\0\0WEBPVP8 " + bytes(8), "WebP"),
        "tiff header only": (b"II*\0\x08\0\0\0", "TIFF"),
        "jp2 signature only": (b"\0\0\0\x0cjP  \r\n\x87\n", "JPEG 2000"),
    }
    for name in ("jpeg", "png", "webp", "tiff", "jp2", "bmp", "ppm"):
        fmt, array, mode, options = IMAGES[name]
        data = encoded(pil, array, fmt, mode, **options)
        for cut in (len(data) // 3, len(data) - 7):
            cases[f"{name} cut at {cut}"] = (data[:cut], "")
    return cases


def test_malformed_bytes_fail_the_run_cleanly(pil, session):
    for name, (data, says) in malformed(pil).items():
        with pytest.raises(onnxc.RuntimeFailure, match="ImageDecoder") as failure:
            session.run(None, {"encoded": np.frombuffer(data, np.uint8)})
        assert says in str(failure.value), name
    # the session still decodes afterwards
    data = encoded(pil, RGB, "PNG")
    np.testing.assert_array_equal(session.run(None, {"encoded": np.frombuffer(data, np.uint8)})[0], RGB)


def test_random_and_mutated_bytes_decode_or_fail_cleanly(pil, session):
    """Random bytes behind each format's first bytes, and valid files with bytes overwritten:
    each run gives an image of three or one channels or fails with a message, never a crash."""
    fuzz = np.random.default_rng(11)
    magics = [b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"RIFF\0\0\0\0WEBPVP8 ", b"II*\0", b"MM\0*",
              b"\0\0\0\x0cjP  \r\n\x87\n", b"\xff\x4f\xff\x51", b"BM", b"P6 ", b"P1\n", b""]
    inputs = [m + fuzz.integers(0, 256, fuzz.integers(0, 300), dtype=np.uint8).tobytes()
              for m in magics for _ in range(8)]
    for name in ("jpeg", "png", "webp", "tiff", "jp2", "bmp", "ppm"):
        fmt, array, mode, options = IMAGES[name]
        data = encoded(pil, array, fmt, mode, **options)
        for _ in range(12):
            mutated = bytearray(data)
            for at in fuzz.integers(0, len(data), fuzz.integers(1, 8)):
                mutated[at] = fuzz.integers(0, 256)
            inputs.append(bytes(mutated))
    decoded = 0
    for data in inputs:
        try:
            rgb, bgr, gray = session.run(None, {"encoded": np.frombuffer(data, np.uint8)})
        except onnxc.RuntimeFailure as e:
            assert str(e).count("ImageDecoder") == 1, str(e)
            continue
        decoded += 1
        assert rgb.shape[2] == 3 and gray.shape == rgb.shape[:2] + (1,)
        np.testing.assert_array_equal(bgr, rgb[:, :, ::-1])
    assert decoded < len(inputs)


def test_invalid_models_are_refused_before_any_c(pil):
    bad_format = decoder_model(pixel_formats=("RGB",))
    bad_format.graph.node[0].attribute[0].s = b'RGB"); abort(); /*'
    with pytest.raises(onnxc.ShapeError, match="pixel_format must be one of"):
        onnxc.InferenceSession(bad_format.SerializeToString())
    floats = make_model([helper.make_node("ImageDecoder", ["x"], ["y"])], [("x", TensorProto.FLOAT, [8])],
                        [("y", U8, [None, None, 3])], opset=20)
    with pytest.raises(onnxc.ShapeError, match="1-D uint8"):
        onnxc.InferenceSession(floats.SerializeToString())


def test_hostile_node_names_stay_out_of_the_code(pil):
    """A node name made to close the comment and the string it is written into."""
    model = decoder_model(name='*/ abort(); /* "\\n\nint x = 1;', pixel_formats=("BGR",))
    sess = onnxc.InferenceSession(model.SerializeToString())
    data = encoded(pil, RGB, "BMP")
    np.testing.assert_array_equal(sess.run(None, {"encoded": np.frombuffer(data, np.uint8)})[0], RGB[:, :, ::-1])


def test_a_package_refuses_it_with_the_reason():
    from onnxc.driver import CompileOptions, generate_source
    with pytest.raises(onnxc.UnsupportedError, match="a --target c package cannot decode images"):
        generate_source(decoder_model(), CompileOptions(target="c"))


def test_models_without_it_link_no_image_library():
    from onnxc.driver import CompileOptions, generate_source
    relu = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [4])],
                      [("y", TensorProto.FLOAT, [4])])
    assert generate_source(relu, CompileOptions()).libraries == {}
    assert set(generate_source(decoder_model(), CompileOptions()).libraries) == set(LIBRARIES)


def test_a_missing_library_is_named(monkeypatch, tmp_path):
    """Without a library's header the build stops before the C compiler, naming it."""
    from onnxc.codegen import system_libraries as sl
    from onnxc.driver import CompileOptions, compile_model
    absent = sl.SystemLibrary("onnxc_absent/decode.h", "onnxc-absent", ("-lonnxc_absent",), "libwebp-dev")
    monkeypatch.setitem(sl.LIBRARIES, "libwebp", absent)
    sl._flags.cache_clear()
    try:
        with pytest.raises(onnxc.CompileError, match=r"libwebp for ImageDecoder \(header onnxc_absent/decode.h, "
                                                     r"Debian package libwebp-dev\)"):
            compile_model(decoder_model(), tmp_path / "artifact", CompileOptions())
    finally:
        sl._flags.cache_clear()
    assert not (tmp_path / "artifact" / "libmodel.so").exists()


def test_the_cuda_build_decodes_on_the_host(pil, monkeypatch):
    """A CUDA build runs the node on the host between kernels (it allocates its output): the
    same decode, its output copied to the device for the Cast after it (the CUDA runtime
    emulated on the CPU, as without a GPU)."""
    from helpers import cuda_session
    from onnxc.runtime import cuda
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")
    nodes = [helper.make_node("ImageDecoder", ["encoded"], ["y"], pixel_format="BGR"),
             helper.make_node("Cast", ["y"], ["f"], to=TensorProto.FLOAT)]
    model = make_model(nodes, [("encoded", U8, ["n"])], [("f", TensorProto.FLOAT, ["h", "w", 3])], opset=20)
    sess = cuda_session(model)
    for name in ("jpeg", "png", "tiff"):
        fmt, array, mode, options = IMAGES[name]
        data = encoded(pil, array, fmt, mode, **options)
        got, = sess.run(None, {"encoded": np.frombuffer(data, np.uint8)})
        np.testing.assert_array_equal(got, pillow_outputs(pil, data)[1].astype(np.float32))
    with pytest.raises(onnxc.RuntimeFailure, match="ImageDecoder: JPEG"):
        sess.run(None, {"encoded": np.frombuffer(b"\xff\xd8\xff\xe0" + bytes(20), np.uint8)})
