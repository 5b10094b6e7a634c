"""Session profiling: onnxruntime's Chrome-trace JSON, from node events timed in generated code.

A profiling build (``CompileOptions.profile``) records, for every node call, its start
and end (CLOCK_MONOTONIC, the clock of ``time.monotonic_ns``) and the dims of its
tensors. This module turns them into the events onnxruntime writes: ``Session``
events for initialization and each run, ``Node`` events named ``<node>_kernel_time``
with the op, provider and input/output types and shapes.
"""
from __future__ import annotations

import datetime
import json
import os
import threading
import time
from typing import Any

PROVIDER = "CPUExecutionProvider"


class Profiler:
    def __init__(self, prefix: str, nodes: list[dict[str, Any]]) -> None:
        self.prefix = prefix
        self.nodes = nodes
        self.start_ns = time.time_ns()            # wall clock, as get_profiling_start_time_ns reports
        self._mono0 = time.monotonic_ns()         # the clock events are measured with
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.enabled = True

    def _us(self, mono_ns: int) -> int:
        return max(0, (mono_ns - self._mono0) // 1000)

    def session_event(self, name: str, start_mono: int, end_mono: int, **args: Any) -> None:
        self._add({"cat": "Session", "pid": os.getpid(), "tid": threading.get_native_id(),
                   "dur": max(0, (end_mono - start_mono) // 1000), "ts": self._us(start_mono), "ph": "X",
                   "name": name, "args": args})

    def run_events(self, start_mono: int, end_mono: int, raw: list, run_tag: str = "") -> None:
        """One model_run event and one event per node call of that run."""
        tid = threading.get_native_id()
        events = []
        for item in raw:
            if item[0] == "dropped":
                events.append({"cat": "Session", "pid": os.getpid(), "tid": tid, "dur": 0, "ts": self._us(end_mono),
                               "ph": "X", "name": "profile_events_dropped", "args": {"count": item[1]}})
                continue
            node_id, t0, t1, dims = item
            node = self.nodes[node_id]
            shapes, pos = [], 0
            for t in node["inputs"] + node["outputs"]:
                rank = t["rank"]
                shapes.append({t["dtype"]: dims[pos:pos + rank] if rank >= 0 else "sequence"})
                pos += max(rank, 0)
            n_in = len(node["inputs"])
            events.append({"cat": "Node", "pid": os.getpid(), "tid": tid, "dur": max(0, (t1 - t0) // 1000),
                           "ts": self._us(t0), "ph": "X", "name": f"{node['name'] or node['op'] + '_' + str(node_id)}_kernel_time",
                           "args": {"op_name": node["op"], "provider": PROVIDER, "node_index": str(node_id),
                                    "input_type_shape": shapes[:n_in], "output_type_shape": shapes[n_in:]}})
        args = {"run_tag": run_tag} if run_tag else {}
        self._add({"cat": "Session", "pid": os.getpid(), "tid": tid, "dur": max(0, (end_mono - start_mono) // 1000),
                   "ts": self._us(start_mono), "ph": "X", "name": "model_run", "args": args}, *events)

    def _add(self, *events: dict[str, Any]) -> None:
        with self._lock:
            if self.enabled:
                self._events.extend(events)

    def end(self) -> str:
        """Write the trace (``<prefix>_<date>_<time>.json`` in the working folder); its name."""
        with self._lock:
            self.enabled = False
            events = list(self._events)
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        name = f"{self.prefix}_{stamp}.json"
        with open(name, "w", encoding="utf-8") as f:
            json.dump(events, f, indent=0)
        return name
