"""Where onnxruntime's Python package keeps its native layer (``onnxruntime.capi``).

Code written for onnxruntime imports its exception classes from here
(``from onnxruntime.capi.onnxruntime_pybind11_state import Fail``); with
``import onnxc as ort`` the same import path works under ``onnxc.capi``.
"""
