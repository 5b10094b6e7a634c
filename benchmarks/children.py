"""Child processes that run one module of this package and answer with a JSON line: memory
probes and numpy's BLAS timing need a process of their own (a clean heap; a BLAS thread
count fixed before numpy loads)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def run_module(module: str, args: list[str], extra_env: dict[str, str] | None = None,
               timeout_s: float = 600) -> dict[str, Any]:
    """``python -m <this package>.<module> ARGS``: its last stdout line as JSON, or {"error": ...}."""
    command = [sys.executable, "-m", f"{__package__}.{module}", *args]
    env = _child_env()
    env.update(extra_env or {})
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        errors = (done.stderr or done.stdout).strip().splitlines()
        return {"error": errors[-1] if errors else f"exit status {done.returncode}"}
    return json.loads(lines[-1])


def _child_env() -> dict[str, str]:
    """The parent's environment (its ONNXC_CACHE_DIR above all), with the folder that holds
    this package first on the path so ``python -m`` finds it from any working directory."""
    top = sys.modules[__package__.partition(".")[0]]
    root = os.path.dirname(os.path.dirname(os.path.abspath(top.__file__ or "")))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
