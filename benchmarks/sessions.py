"""How each runtime's session is made, in one place so the timing process and the memory
child processes configure them alike. The runtimes are imported on first use: a memory
child imports only the one it measures."""
from __future__ import annotations

from typing import Any


def onnxc_session(model_path: str, threads: int, precision: str = "fp32") -> Any:
    """onnxc with ``threads`` intra-op threads (a build with OpenMP when above one), its GEMMs in
    ``precision`` (session.onnxc.precision). A model with symbolic input dims (a free batch too) is built
    for the shape it is timed at during the warm-up runs (``sync``), where a session by default
    builds it in the background while the generic build serves the runs: the timed runs measure
    the state the default reaches seconds later."""
    import onnxc
    options = onnxc.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.onnxc.specialise_shapes", "sync")
    if precision != "fp32":
        options.add_session_config_entry("session.onnxc.precision", precision)
    return onnxc.InferenceSession(model_path, options)


def ort_session(model_path: str, threads: int, optimized: bool = True) -> Any:
    """onnxruntime as a user would run it: CPU provider, all graph optimisations (the default),
    ``threads`` intra-op threads and one inter-op thread (sequential execution). ``optimized``
    False: no graph optimisation, the model's graph computed as written (the second reference
    of the output checks, see written_graph_outputs)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])


def written_graph_outputs(model_path: str, threads: int, feed: dict[str, Any]) -> list[Any]:
    """onnxruntime's outputs of the graph as written (no graph optimisation). The output checks
    take these where onnxc's differ from the optimised session's: onnxruntime's fusions of a
    quantized (QDQ) model change its arithmetic (a QuantizeLinear after a float Add becomes
    QLinearAdd's own rounding, and which fusions apply depends on the CPU: s8 activations are
    fused where MLAS has an s8 x s8 kernel, as with AMX), so a model computed exactly as written
    can differ from the default session by a quantization step. The tables say which matched."""
    return ort_session(model_path, threads, optimized=False).run(None, feed)


SESSION_MAKERS = {"onnxc": onnxc_session, "onnxruntime": ort_session}
