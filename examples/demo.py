"""Demo: compile ResNet-50 (the onnx package's light variant, given random weights),
then load the artifact and classify a random image. Run: python examples/demo.py"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import onnx

import onnxc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from models import light_model_path, with_random_weights  # noqa: E402


def main() -> None:
    model = with_random_weights(onnx.load(light_model_path("light_resnet50")))
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
    sess.run(None, {name: image})
    start = time.perf_counter()
    probs, = sess.run(None, {name: image})
    took = time.perf_counter() - start
    top5 = np.argsort(probs[0])[::-1][:5]
    print(f"ran in {took * 1e3:.1f} ms; top-5 classes: {top5.tolist()} "
          f"(p = {', '.join(f'{probs[0, i]:.3f}' for i in top5)})")


if __name__ == "__main__":
    main()
