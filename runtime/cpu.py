"""The instruction-set features of this CPU, and whether an artifact's code can run on it.

An artifact records the features its library was compiled for (``manifest["isa"]``, in the
spelling of Linux's /proc/cpuinfo, from the compiler's target macros: see
``codegen/toolchain.py``). Loading one built for features this CPU lacks (a cache or an
artifact folder shared between machines, a ``--march`` newer than the machine) would die of
an illegal instruction; it is refused with the list of what is missing instead.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Iterable, Optional

from ..compiler.errors import ModelError

CPUINFO = "/proc/cpuinfo"


@functools.lru_cache(maxsize=1)
def host_features() -> Optional[frozenset[str]]:
    """The feature flags of this machine's CPU (x86 ``flags``, Arm ``Features``), or None where
    the system does not say (no /proc/cpuinfo)."""
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return None


def missing_features(required: Iterable[str]) -> list[str]:
    """Of ``required``, the features this CPU lacks (none where the CPU's features are unknown)."""
    have = host_features()
    if have is None:
        return []
    return sorted(set(required) - have)


def check_runs_here(folder: str, manifest: dict[str, Any]) -> None:
    """Raises ModelError if the artifact's library was compiled for features this CPU lacks."""
    lacking = missing_features(manifest.get("isa", ()))
    if lacking:
        built = manifest.get("options", {}).get("march") or "a baseline x86-64"
        raise ModelError(
            f"{os.fspath(folder)!r} was compiled for CPU features this machine lacks ({', '.join(lacking)}; "
            f"built with -march={built} on another machine): running it would stop at an illegal "
            "instruction. Compile the model on this machine, or for the oldest CPU that must run it "
            "(onnxc compile --march x86-64-v3, or --portable)")
