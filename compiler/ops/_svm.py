"""Shared parts of SVMRegressor and SVMClassifier (onnxruntime's SVMCommon)."""
from __future__ import annotations

import numpy as np

from ...codegen.literals import c_literals, float_literal
from .. import dtypes as dt
from ..ir import Node

HELPER = "c/helpers/svm.c.j2"
KERNELS = {"LINEAR": 0, "POLY": 1, "RBF": 2, "SIGMOID": 3}


def kernel_data(node: Node, ctx) -> dict:
    """The kernel code and its parameters as C literals."""
    kind = node.attrs.get("kernel_type", "LINEAR")
    if kind not in KERNELS:
        raise ctx.fail(f"kernel_type must be one of {', '.join(KERNELS)}, got {kind!r}")
    params = list(node.attrs.get("kernel_params", ()))
    if params and len(params) < 3:
        raise ctx.fail("kernel_params must be [gamma, coef0, degree]")
    gamma, coef0, degree = params[:3] if params else (0.0, 0.0, 0.0)
    return {"kernel": KERNELS[kind], "gamma": float_literal(gamma, "float"),
            "coef0": float_literal(coef0, "float"), "degree": float_literal(degree, "float")}


def floats(values) -> list[str]:
    """Float attribute values as C float literals."""
    return c_literals(np.asarray(values, dtype=np.float32), dt.FLOAT)
