"""How long a cold compile takes, stage by stage, and how much memory it needs.

``python -m onnxc.benchmarks.compile_time`` compiles the light zoo (and any model files
given) with an empty cache, one model per child process, and prints a Markdown table:
load and check, the passes, code generation, the C compile (wall time until the last
translation unit is built) and the link, the total, the units built, the compiler's CPU
time, and the peak resident memory of the compiling Python process. On a shared machine wall times follow its load, so the table also gives what the
C compile takes on idle cores: the units' own CPU times scheduled on the build's jobs,
biggest first. ``--one-unit`` builds every model as one translation unit (the build before
units were split), so the two can be measured back to back on the same machine.
``--warm-helpers`` measures a second compile in the same cache, which finds the helper objects
(GEMM, Winograd) the first one built: what a compile costs once the machine has them.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

from .models import LIGHT_ZOO, light_zoo_model

COLUMNS = ("load/check", "passes", "codegen", "C compile", "link")


def compile_once(path: str, one_unit: bool, threads: int) -> dict[str, Any]:
    """Compiles ``path`` in this process (a child of ``main``) and returns its stage times."""
    from ..codegen import units
    from ..driver import CompileOptions, compile_model
    if one_unit:
        units.UNIT_BYTES = 1 << 62
    seconds = dict.fromkeys(COLUMNS, 0.0)
    built: list[float] = []
    # (the compiling thread's CPU time: the weights writer and the model digest run on threads of
    # their own, beside the C compile)
    start, cpu_start = time.perf_counter(), time.thread_time()
    last = {"mark": start, "front_cpu": 0.0}

    def on_stage(stage: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if stage == "compile":
            if info["cpu"] > 0:   # (0: a helper object the cache had)
                built.append(info["cpu"])
            seconds["C compile"] = now - last["mark"]   # (from the end of codegen: wall time)
            return
        if stage == "codegen":
            last["mark"] = now
            last["front_cpu"] = time.thread_time() - cpu_start
        seconds["passes" if stage == "pass" else stage] += info["seconds"]

    with tempfile.TemporaryDirectory() as folder:
        manifest = compile_model(path, folder, CompileOptions(threads=threads), on_stage=on_stage)
    total = time.perf_counter() - start
    from ..runtime.options import usable_cores
    return {"seconds": seconds, "total": total, "units": len(built), "nodes": len(manifest.get("nodes", ())),
            "idle_compile": idle_makespan(built, usable_cores()) + seconds["link"], "front_cpu": last["front_cpu"],
            "rss_mib": peak_rss_mib(), "cc_cpu": sum(built)}


def peak_rss_mib() -> float:
    """This process's peak resident memory. (Not getrusage's: on Linux it keeps the parent's
    peak across fork and exec, so a child of a big process reports the parent's.)"""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def idle_makespan(cpu: list[float], jobs: int) -> float:
    """How long jobs of these CPU times take on ``jobs`` idle cores, biggest first."""
    cores = [0.0] * max(1, jobs)
    for t in sorted(cpu, reverse=True):
        cores[cores.index(min(cores))] += t
    return max(cores)


def measure(path: str, one_unit: bool, threads: int, warm_helpers: bool = False) -> dict[str, Any]:
    """``compile_once`` in a fresh process with an empty cache: nothing warm, RSS its own. With
    ``warm_helpers``, the cache holds what an earlier compile of the model left there (its helper
    objects and compiled templates), as on a machine that has built such a model before."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "ONNXC_CACHE_DIR": cache}
        cmd = [sys.executable, "-m", "onnxc.benchmarks.compile_time", "--child", path, "--threads", str(threads)]
        if one_unit:
            cmd.append("--one-unit")
        for _ in range(2 if warm_helpers else 1):
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"compiling {path} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    lines = ["| model | nodes | " + " | ".join(COLUMNS) + " | total | units | cc CPU | C compile + link, idle cores "
             "| total, idle cores | peak RSS |", "|---" * (len(COLUMNS) + 8) + "|"]
    for name, r in rows:
        front = r["front_cpu"]   # (load/check, passes and codegen: one Python thread's CPU time)
        lines.append(f"| {name} | {r['nodes']} | " + " | ".join(f"{r['seconds'][c]:.2f}" for c in COLUMNS)
                     + f" | {r['total']:.2f} | {r['units']} | {r['cc_cpu']:.1f} | {r['idle_compile']:.2f} | "
                     f"**{front + r['idle_compile']:.2f}** | {r['rss_mib']:.0f} MiB |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnxc.benchmarks.compile_time", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="model files to compile besides the light zoo")
    parser.add_argument("--zoo", default=",".join(LIGHT_ZOO),
                        help="light-zoo models to compile, comma-separated ('' for none; default all)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of the build (default 1)")
    parser.add_argument("--one-unit", action="store_true", help="every model as one translation unit")
    parser.add_argument("--warm-helpers", action="store_true",
                        help="measure a second compile of each model, its helper objects in the cache")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(compile_once(args.models[0], args.one_unit, args.threads)))
        return 0
    import onnx
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for name in [n for n in args.zoo.split(",") if n]:
            path = os.path.join(folder, f"{name}.onnx")
            onnx.save(light_zoo_model(name), path)
            paths.append((name, path))
        paths += [(os.path.basename(p), p) for p in args.models]
        for name, path in paths:
            rows.append((name, measure(path, args.one_unit, args.threads, args.warm_helpers)))
            print(f"{name}: {rows[-1][1]['total']:.2f}s", file=sys.stderr, flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} at the end; "
          f"{'one unit' if args.one_unit else 'units split'}, {args.threads} thread(s), "
          f"{'warm' if args.warm_helpers else 'cold'} helper objects")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
