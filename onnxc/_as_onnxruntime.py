"""Code written for onnxruntime, run on onnxc without editing it."""
from __future__ import annotations

import sys


def install_as_onnxruntime() -> None:
    """Make ``import onnxruntime`` give onnxc, in this process from now on.

    For a library that imports onnxruntime itself (``from onnxruntime import InferenceSession``)
    and cannot be edited: call this before the library is imported. Besides ``onnxruntime``,
    ``onnxruntime.capi`` and ``onnxruntime.capi.onnxruntime_pybind11_state`` (where onnxruntime
    keeps its exception classes) name onnxc's counterparts. A module that imported the real
    onnxruntime before this call keeps it.
    """
    import onnxc
    from onnxc import capi
    from onnxc.capi import onnxruntime_pybind11_state
    sys.modules["onnxruntime"] = onnxc
    sys.modules["onnxruntime.capi"] = capi
    sys.modules["onnxruntime.capi.onnxruntime_pybind11_state"] = onnxruntime_pybind11_state
