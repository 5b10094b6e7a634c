"""Demo: compile ResNet-50 (the onnx package's light variant, given random weights), load the
artifact, classify a random image, and run the same model on onnxruntime when it is installed:
both times and the largest difference of the outputs. Run: python examples/demo.py"""
from __future__ import annotations

import os
import time

import numpy as np
import onnx

import onnxc
from onnxc.benchmarks.models import light_zoo_model


def main() -> None:
    model = light_zoo_model("light_resnet50")      # the benchmark suite's ResNet-50
    os.makedirs("build", exist_ok=True)
    onnx.save(model, "build/resnet50.onnx")

    start = time.perf_counter()
    onnxc.compile_model("build/resnet50.onnx", "build/resnet50", command="python examples/demo.py")
    print(f"compiled build/resnet50.onnx -> build/resnet50/ in {time.perf_counter() - start:.1f}s")

    options = onnxc.SessionOptions()
    options.intra_op_num_threads = 1    # what compile_model builds by default
    sess = onnxc.InferenceSession("build/resnet50", options)
    name = sess.get_inputs()[0].name
    image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    probs, took = timed(sess, {name: image})
    top5 = np.argsort(probs[0])[::-1][:5]
    print(f"onnxc ran it in {took * 1e3:.1f} ms; top-5 classes of a random image: {top5.tolist()}")
    try:
        import onnxruntime
    except ImportError:
        return
    reference = onnxruntime.InferenceSession("build/resnet50.onnx", providers=["CPUExecutionProvider"])
    expected, ort_took = timed(reference, {name: image})
    print(f"onnxruntime {onnxruntime.__version__} ran it in {ort_took * 1e3:.1f} ms; "
          f"top-5 classes {np.argsort(expected[0])[::-1][:5].tolist()}, largest difference of the outputs: "
          f"{float(np.max(np.abs(probs - expected))):.1e}")


def timed(sess, feed: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
    """The first output, and the fastest of three runs after a warm-up run, in seconds."""
    sess.run(None, feed)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        out, = sess.run(None, feed)
        times.append(time.perf_counter() - start)
    return out, min(times)

if __name__ == "__main__":
    main()
