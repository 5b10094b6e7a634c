"""int8 models made from corpus models with onnxruntime's quantization tools, as users make
them: ``quantize_static`` in the QDQ format (calibrated on a few seeded feeds of the model's
own kind) and ``quantize_dynamic`` (int8 weights, activations quantized at run time). The
files go to the corpus cache, keyed by onnxruntime's version and the base model's."""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, Iterator

import numpy as np

from .feeds import Feed
from .wheels import SourceUnavailable

CALIBRATION_FEEDS = 4


@dataclasses.dataclass(frozen=True)
class Quantized:
    base: Any                                            # a source with describe() and fetch()
    mode: str                                            # "static" (QDQ) or "dynamic"
    feed: Callable[[np.random.Generator], Feed]          # calibration inputs (static)

    def describe(self) -> str:
        how = "quantize_static, QDQ, int8" if self.mode == "static" else "quantize_dynamic, int8 weights"
        return f"onnxruntime {how} of {self.base.describe()}"

    def fetch(self, cache: str, rebuild: bool = False) -> str:
        import onnxruntime
        base_path = self.base.fetch(cache, rebuild=False)
        stem = os.path.splitext(os.path.basename(base_path))[0]
        folder = os.path.join(cache, "quantized", f"onnxruntime-{onnxruntime.__version__}",
                              os.path.basename(os.path.dirname(base_path)))
        path = os.path.join(folder, f"{stem}.{self.mode}.onnx")
        if os.path.exists(path) and not rebuild:
            return path
        os.makedirs(folder, exist_ok=True)
        partial = path + ".part.onnx"
        try:
            self._quantize(base_path, partial, folder)
        except Exception as e:  # noqa: BLE001 - onnxruntime's tools raise anything
            raise SourceUnavailable(f"quantization failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from e
        os.replace(partial, path)
        return path

    def _quantize(self, source: str, target: str, folder: str) -> None:
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process
        prepared = os.path.join(folder, os.path.basename(source) + ".pre.onnx")
        quant_pre_process(source, prepared, skip_symbolic_shape=True)
        try:
            if self.mode == "dynamic":
                quantize_dynamic(prepared, target, weight_type=QuantType.QInt8)
            else:
                quantize_static(prepared, target, _Calibration(self.feed), quant_format=QuantFormat.QDQ,
                                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
        finally:
            os.remove(prepared)


class _Calibration:
    """onnxruntime's CalibrationDataReader protocol over seeded feeds."""

    def __init__(self, feed: Callable[[np.random.Generator], Feed]) -> None:
        self._feeds: Iterator[Feed] = (feed(np.random.default_rng(100 + k)) for k in range(CALIBRATION_FEEDS))

    def get_next(self) -> Feed | None:
        return next(self._feeds, None)
