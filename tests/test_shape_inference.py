"""onnxc's own shape/dtype inference agrees with onnx.shape_inference wherever both know a dim."""
from __future__ import annotations

import warnings

import onnx

from conformance.cases import all_cases
from onnxc.compiler import dtypes as dt
from onnxc.compiler.errors import OnnxcError
from onnxc.compiler.frontend import build_graph, load_model
from onnxc.compiler.passes.infer import infer_shapes


def _onnx_types(model: onnx.ModelProto) -> dict[str, tuple[int, list]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    out = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        out[vi.name] = (tt.elem_type, dims)
    return out


def _compare(model: onnx.ModelProto) -> list[str]:
    graph = build_graph(load_model(model))
    infer_shapes(graph)
    theirs = _onnx_types(model)
    problems = []
    for node in graph.nodes:
        for v in node.outputs:
            if v.name not in theirs:
                continue
            elem, dims = theirs[v.name]
            if elem and dt.from_onnx(elem) != v.dtype:
                problems.append(f"{v.name}: dtype {v.dtype} vs onnx {dt.from_onnx(elem)}")
            if len(dims) != len(v.shape):
                problems.append(f"{v.name}: rank {len(v.shape)} vs onnx {len(dims)}")
                continue
            for ours, expected in zip(v.shape, dims):
                if isinstance(ours, int) and expected is not None and ours != expected:
                    problems.append(f"{v.name}: shape {v.shape} vs onnx {dims}")
                    break
    return problems


def test_inference_matches_onnx_on_conformance_models():
    checked, mismatches = 0, {}
    for name, case in sorted(all_cases().items()):
        try:
            problems = _compare(case.model)
        except OnnxcError:
            continue  # unsupported here; the conformance suite accounts for it
        checked += 1
        if problems:
            mismatches[name] = problems
    assert checked > 100
    assert not mismatches, f"{len(mismatches)} models disagree: " + "; ".join(
        f"{k}: {v[0]}" for k, v in list(mismatches.items())[:10])
