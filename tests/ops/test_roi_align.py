"""RoiAlign against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxc
from helpers import assert_matches_ort, make_model, run_ort

F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def roi_align(x_shape, num_rois, opset=16, elem=F, **attrs):
    node = helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], **attrs)
    out = [num_rois, x_shape[1], attrs.get("output_height", 1), attrs.get("output_width", 1)]
    return make_model([node], [("X", elem, x_shape), ("rois", elem, [num_rois, 4]),
                               ("batch_indices", TensorProto.INT64, [num_rois])], [("Y", elem, out)], opset=opset)


def feeds(x_shape, num_rois, dtype=np.float32):
    h, w = x_shape[2], x_shape[3]
    x1 = rng.uniform(-2, w, num_rois)
    y1 = rng.uniform(-2, h, num_rois)
    rois = np.stack([x1, y1, x1 + rng.uniform(0.5, w, num_rois), y1 + rng.uniform(0.5, h, num_rois)], axis=1)
    return {"X": rng.standard_normal(x_shape).astype(dtype), "rois": rois.astype(dtype),
            "batch_indices": rng.integers(0, x_shape[0], num_rois).astype(np.int64)}


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align(mode, ctm, sampling_ratio):
    m = roi_align([2, 3, 8, 9], 5, mode=mode, coordinate_transformation_mode=ctm, sampling_ratio=sampling_ratio,
                  output_height=3, output_width=4, spatial_scale=0.8)
    assert_matches_ort(m, feeds([2, 3, 8, 9], 5))


def test_opset10_and_double():
    m = roi_align([1, 2, 6, 6], 3, opset=10, output_height=2, output_width=2)
    assert_matches_ort(m, feeds([1, 2, 6, 6], 3))
    m = roi_align([1, 2, 6, 6], 3, elem=TensorProto.DOUBLE, output_height=2, output_width=3)
    assert_matches_ort(m, feeds([1, 2, 6, 6], 3, np.float64), rtol=1e-10, atol=1e-10)


def test_symbolic_rois():
    m = roi_align(["N", 2, "H", "W"], "R", output_height=2, output_width=2)
    sess = onnxc.InferenceSession(m.SerializeToString())
    for shape, r in (([1, 2, 5, 5], 2), ([2, 2, 7, 4], 4)):
        f = feeds(shape, r)
        np.testing.assert_allclose(sess.run(None, f)[0], run_ort(m, f)[0], rtol=1e-5, atol=1e-5)
    f["batch_indices"][0] = 5
    with pytest.raises(Exception, match="batch index out of range"):
        sess.run(None, f)
