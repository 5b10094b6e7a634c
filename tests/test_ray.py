"""onnxc.ray: a compiled CNN scoring a Ray Data dataset on a local 2-CPU Ray cluster.

The model compiles once in the test process; two Ray workers load the artifact folder
(``concurrency=2``, one session each) and run every batch through it, the batch dim symbolic.
Every row is checked against onnxruntime. Cost: ray.init takes about 15 s here, the dataset
pass a few seconds more; the Predictor's own tests run without Ray.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxc
import onnxc.ray
from helpers import make_model, run_ort
from tools import require_module

ROWS = 10_000


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    """Conv 3x3 + ReLU, MaxPool, Conv 3x3 + ReLU, GlobalAveragePool, Flatten, Gemm, Softmax on
    (batch, 3, 16, 16): 10 class probabilities and the raw logits, batch symbolic."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return numpy_helper.from_array((rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1, name="head"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    inits = [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 16, 8, 3, 3), weight("b2", 16),
             weight("w3", 10, 16), weight("b3", 10)]
    return make_model(nodes, [("image", TensorProto.FLOAT, ["batch", 3, 16, 16])],
                      [("probs", TensorProto.FLOAT, ["batch", 10]), ("logits", TensorProto.FLOAT, ["batch", 10])],
                      inits)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("ray") / "cnn"
    onnxc.compile_model(small_cnn().SerializeToString(), folder)
    return str(folder)


def images(rows: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 3, 16, 16)).astype(np.float32)


def test_predictor_runs_a_batch_and_keeps_its_columns(artifact):
    x = images(37)
    ids = np.arange(37)
    out = onnxc.ray.Predictor(artifact, input_columns={"image": "data"})({"data": x.astype(np.float64), "id": ids})
    assert sorted(out) == ["data", "id", "logits", "probs"]
    probs, logits = run_ort(small_cnn(), {"image": x})
    np.testing.assert_allclose(out["probs"], probs, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out["logits"], logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out["id"], ids)


def test_predictor_stacks_rows_and_renames_outputs(artifact):
    x = images(5)
    rows = np.empty(5, dtype=object)
    rows[:] = list(x)            # Ray's form of a column whose cells are tensors
    out = onnxc.ray.Predictor(artifact, output_columns={"probs": "p"}, keep_columns=False)({"image": rows})
    assert list(out) == ["p"]
    np.testing.assert_allclose(out["p"], run_ort(small_cnn(), {"image": x})[0], rtol=1e-4, atol=1e-6)


def test_predictor_names_missing_columns_and_unknown_names(artifact):
    with pytest.raises(onnxc.InvalidArgument, match=r"column 'image'.*columns: \['data'\]"):
        onnxc.ray.Predictor(artifact)({"data": images(2)})
    with pytest.raises(onnxc.InvalidArgument, match=r"no model output: \['score'\].*\['probs', 'logits'\]"):
        onnxc.ray.Predictor(artifact, output_columns={"score": "s"})
    with pytest.raises(onnxc.InvalidArgument, match=r"no model input: \['img'\]"):
        onnxc.ray.Predictor(artifact, input_columns={"img": "data"})


def test_predictor_slices_batches_for_a_fixed_batch_size(tmp_path):
    folder = tmp_path / "cnn4"
    onnxc.compile_model(small_cnn().SerializeToString(), folder,
                        onnxc.CompileOptions(dim_overrides=(("name", "batch", 4),)))
    predictor = onnxc.ray.Predictor(folder)
    x = images(8)
    out = predictor({"image": x})
    np.testing.assert_allclose(out["probs"], run_ort(small_cnn(), {"image": x})[0], rtol=1e-4, atol=1e-6)
    with pytest.raises(onnxc.InvalidArgument, match="exactly 4 rows.*has 6"):
        predictor({"image": images(6)})


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance with 2 CPUs on loopback: no dashboard, no usage reports sent out."""
    ray = require_module("ray")
    require_module("ray.data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        try:
            yield ray
        finally:
            ray.shutdown()


def test_ray_data_scores_every_row_like_onnxruntime(ray_cluster, artifact):
    x = images(ROWS)
    blocks = np.array_split(x, 4)           # four blocks: both workers get some
    ds = ray_cluster.data.from_numpy(blocks).map_batches(
        onnxc.ray.Predictor, fn_constructor_kwargs={"artifact": artifact, "input_columns": {"image": "data"}},
        batch_size=512, concurrency=2)
    parts = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    data, probs, logits = (np.concatenate([p[column] for p in parts]) for column in ("data", "probs", "logits"))
    assert probs.shape == logits.shape == (ROWS, 10)
    # every input row came back once (Ray Data need not keep the order)
    np.testing.assert_array_equal(data[np.argsort(data[:, 0, 0, 0])], x[np.argsort(x[:, 0, 0, 0])])
    expected_probs, expected_logits = run_ort(small_cnn(), {"image": data})
    np.testing.assert_allclose(probs, expected_probs, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(logits, expected_logits, rtol=1e-4, atol=1e-5)
