"""Shared pieces of the ai.onnx.ml operators (scikit-learn style models).

The numeric behaviour follows onnxruntime's ml kernels: scores are float, the
post transforms are computed in float by the functions of c/helpers/ml.c.j2,
and the special cases of binary classifiers write two score columns.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from .registry import InferContext

HELPER = "c/helpers/ml.c.j2"
ML = "ai.onnx.ml"

# onnxruntime's POST_EVAL_TRANSFORM order; the C helpers take these codes.
NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT = range(5)
TRANSFORMS = {"NONE": NONE, "LOGISTIC": LOGISTIC, "SOFTMAX": SOFTMAX, "SOFTMAX_ZERO": SOFTMAX_ZERO, "PROBIT": PROBIT}

# Input types of the classifiers and of the feature transformers.
FEATURE_TYPES = (dt.FLOAT, dt.DOUBLE, dt.INT64, dt.INT32)


def transform(node: Node, ctx: InferContext | None = None) -> int:
    """The post_transform attribute as a helper code."""
    name = node.attrs.get("post_transform", "NONE")
    if name not in TRANSFORMS:
        msg = f"post_transform must be one of {', '.join(TRANSFORMS)}, got {name!r}"
        raise ctx.fail(msg) if ctx is not None else UnsupportedError(f"{node.label}: {msg}")
    return TRANSFORMS[name]


def int_labels(node: Node, attr: str) -> list:
    """The class labels: ``classlabels_strings`` if given, else the integers of ``attr``."""
    if node.attrs.get("classlabels_strings"):
        return list(node.attrs["classlabels_strings"])
    return [int(v) for v in node.attrs.get(attr, ())]


def label_type(node: Node) -> dt.DType:
    """The element type of a classifier's label output."""
    return dt.STRING if node.attrs.get("classlabels_strings") else dt.INT64


def feature_tensor(ctx: InferContext):
    """Input 0 as a feature tensor of any rank >= 1 (Scaler, Imputer)."""
    x = ctx.inp(0)
    if x.dtype not in FEATURE_TYPES:
        raise ctx.fail(f"X type {x.dtype} is not supported")
    if not x.shape:
        raise ctx.fail("X must have at least one dim")
    return x


def check_input(ctx: InferContext, types=FEATURE_TYPES, name: str = "X", matrix: bool = False):
    """The [N, C] (or, unless ``matrix``, [C]) feature input: returns (N, C) dims."""
    x = ctx.inp(0)
    if x.dtype not in types:
        raise ctx.fail(f"{name} type {x.dtype} is not supported (expected one of {', '.join(map(str, types))})")
    if len(x.shape) == 1 and not matrix:
        return 1, x.shape[0]
    if len(x.shape) == 2:
        return x.shape[0], x.shape[1]
    raise ctx.fail(f"{name} must be [N, C]{'' if matrix else ' or [C]'}, got shape {list(x.shape)}")


def floats(node: Node, name: str, tensor_name: str | None = None) -> np.ndarray | None:
    """A float list attribute, or its ``*_as_tensor`` variant (as float64); None when both are absent."""
    if tensor_name is not None and node.attrs.get(tensor_name) is not None:
        if node.attrs.get(name):
            raise UnsupportedError(f"{node.label}: only one of {name!r} and {tensor_name!r} may be given")
        return np.asarray(node.attrs[tensor_name], dtype=np.float64).reshape(-1)
    values = node.attrs.get(name)
    if values is None:
        return None
    return np.asarray(values, dtype=np.float32).astype(np.float64)
