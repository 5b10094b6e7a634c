"""``python -m onnxc.benchmarks.corpus.export_one SPEC``: one torch.onnx.export, in a process
of its own (see exports.py). SPEC is the JSON the parent writes: builder, exporter, opset,
input and output names, dynamic dims and the target path, and optionally ``models``, the module
of this package that holds the builder (``torch_models``, or ``tiny_models`` for the tests' small
versions)."""
from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import time
import warnings


def export(spec: dict) -> None:
    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    # nn.MultiheadAttention's inference fast path is one fused aten op that the TorchScript
    # exporter cannot write (ViT); users turn it off to export, as here.
    torch.backends.mha.set_fastpath_enabled(False)
    models = importlib.import_module(f"{__package__}.{spec.get('models', 'torch_models')}")
    model, example = getattr(models, spec["builder"])()
    spec["example_shapes"] = [list(t.shape) for t in example]
    dynamic_axes: dict[str, dict[int, str]] = {}
    for name, axis, dim in spec["dynamic"]:
        dynamic_axes.setdefault(name, {})[axis] = dim
    path, partial = spec["path"], spec["path"] + ".part.onnx"
    start = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if spec["exporter"] == "torchscript":
            torch.onnx.export(model, example, partial, input_names=spec["inputs"], output_names=spec["outputs"],
                              dynamic_axes=dynamic_axes, opset_version=spec["opset"], dynamo=False)
        else:
            program, spec["dynamic_shapes"] = _dynamo(torch, model, example, spec, dynamic_axes)
            program.save(partial, external_data=False)
    seconds = time.perf_counter() - start
    os.replace(partial, path)
    with open(path + ".json", "w", encoding="utf-8") as f:
        json.dump({**spec, "export_s": round(seconds, 1), "torch": torch.__version__}, f, indent=1)


def _dynamo(torch, model, example, spec: dict, dynamic_axes: dict[str, dict[int, str]]):
    """The dynamo export with the dynamic dims as ``Dim.AUTO`` (export works out how they relate,
    e.g. the mask's length is the cache's plus one, and keeps size-1 dims static); where that
    fails, the static export, as users fall back to, recorded in the JSON beside the file."""
    shapes = tuple({axis: torch.export.Dim.AUTO for axis in dynamic_axes.get(name, {})} for name in spec["inputs"])
    params = list(inspect.signature(model.forward).parameters.values())
    if params and params[-1].kind == inspect.Parameter.VAR_POSITIONAL:   # dynamic_shapes nests *args in a tuple
        shapes = shapes[:len(params) - 1] + (shapes[len(params) - 1:],)
    common = {"input_names": spec["inputs"], "output_names": spec["outputs"], "opset_version": spec["opset"],
              "dynamo": True, "optimize": True}
    try:
        return torch.onnx.export(model, example, dynamic_shapes=shapes, **common), "auto"
    except Exception as e:  # noqa: BLE001 - torch.export raises many kinds
        print(f"dynamic export failed ({type(e).__name__}), exporting static shapes", file=sys.stderr)
        return torch.onnx.export(model, example, **common), "static"


if __name__ == "__main__":
    export(json.loads(sys.argv[1]))
