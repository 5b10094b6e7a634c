"""Batch inference on Ray Data: a CNN scores a dataset of images with onnxc, then the same
pipeline runs with onnxruntime inside Ray; both report rows per second (docs/scale-out.md).

    python examples/ray_batch.py                      # a local Ray instance on this machine's CPUs
    python examples/ray_batch.py --address auto       # a running cluster (ray start), see the doc

Needs the ray extra: pip install 'onnxc[ray]' (and onnxruntime for the comparison).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxc
import onnxc.ray


def cnn(seed: int = 0) -> onnx.ModelProto:
    """Three Conv 3x3 + ReLU stages (16, 32, 64 channels; MaxPool between), GlobalAveragePool and
    a 10-class Gemm + Softmax on (batch, 3, 32, 32), the batch dim symbolic."""
    rng = np.random.default_rng(seed)
    nodes, inits, x, cin = [], [], "image", 3
    for i, cout in enumerate((16, 32, 64)):
        w = rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (cin * 9))
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(np.zeros(cout, np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x, cin = f"r{i}", cout
        if i < 2:
            nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2]))
            x = f"p{i}"
    inits += [numpy_helper.from_array((rng.standard_normal((10, 64)) * 0.2).astype(np.float32), "wh"),
              numpy_helper.from_array(np.zeros(10, np.float32), "bh")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
              helper.make_node("Gemm", ["f", "wh", "bh"], ["logits"], transB=1),
              helper.make_node("Softmax", ["logits"], ["probs"], axis=1)]
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])
    graph = helper.make_graph(nodes, "cnn", [image], [probs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class OnnxruntimePredictor:
    """The same job for onnxruntime: one session per worker, one thread, the batch in one run."""

    def __init__(self, model: str) -> None:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        probs, = self.session.run(None, {"image": batch["data"]})
        return {**batch, "probs": probs}


def score(ds, predictor: type, kwargs: dict, batch_size: int, workers: int) -> tuple[float, int]:
    """Rows per second of the whole pass (workers start, every batch scored, results fetched)."""
    start = time.perf_counter()
    scored = ds.map_batches(predictor, fn_constructor_kwargs=kwargs, batch_size=batch_size, concurrency=workers)
    rows = sum(len(batch["probs"]) for batch in scored.iter_batches(batch_size=None, batch_format="numpy"))
    return rows / (time.perf_counter() - start), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default=None, help="a running cluster's address (default: start one here)")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (one CPU and one session each)")
    parser.add_argument("--artifact", default="build/ray_cnn",
                        help="where the compiled model goes: a folder every node can read on a cluster")
    args = parser.parse_args()

    import ray
    os.makedirs(os.path.dirname(os.path.abspath(args.artifact)), exist_ok=True)
    model = args.artifact + ".onnx"
    onnx.save(cnn(), model)
    # x86-64-v3 (AVX2): one artifact for every node of a cluster of recent x86-64 machines
    onnxc.compile_model(model, args.artifact, onnxc.CompileOptions(march="x86-64-v3"))

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")    # a local run reports nothing to Ray's servers
    ray.init(address=args.address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    images = np.random.default_rng(0).standard_normal((args.rows, 3, 32, 32)).astype(np.float32)
    ds = ray.data.from_numpy(np.array_split(images, 4 * args.workers)).materialize()
    columns = {"image": "data"}
    runs = [("onnxc", onnxc.ray.Predictor, {"artifact": os.path.abspath(args.artifact), "input_columns": columns}),
            ("onnxruntime", OnnxruntimePredictor, {"model": os.path.abspath(model)})]
    for round in (1, 2):     # the first round also pays for starting Ray's worker processes
        for name, predictor, kwargs in runs:
            rate, rows = score(ds, predictor, kwargs, args.batch_size, args.workers)
            print(f"round {round}: {name:12s} {rows} rows, {args.workers} workers, batch {args.batch_size}: "
                  f"{rate:,.0f} rows/s")
    ray.shutdown()


if __name__ == "__main__":
    main()
