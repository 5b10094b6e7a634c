"""Kernel helpers compiled once per machine: helper objects.

The GEMM and Winograd helpers are most of the C compiler's work on a model whose node
functions are few (the GEMM's alone is about a second of CPU at -O3), and their code is the
same in every model built with the same flags. A native build therefore declares them in
its own units (their types, macros and entry points) and links an object compiled from a
unit of their own, ``helpers_<name>.c``: the compile cache keeps that object by the unit's
source, the compiler and its flags (``runtime/cache.py``, ``helper_object``), so a second model
that calls them compiles only its own node functions. The artifact folder keeps the helper
units next to the model's (``cc <flags> *.c -o libmodel.so`` rebuilds the library by hand).
Packages (``--target c``) and CUDA builds keep every helper in their own source.
"""
from __future__ import annotations

from typing import Any

from .templates import render

# Helpers built as objects: template -> the helpers whose declarations its unit needs first.
SHARED: dict[str, tuple[str, ...]] = {
    "c/helpers/gemm.c.j2": (),
    "c/helpers/qgemm.c.j2": (),
    "c/helpers/winograd_f2.c.j2": ("c/helpers/gemm.c.j2",),
    "c/helpers/winograd_f4.c.j2": ("c/helpers/gemm.c.j2",),
}


def unit_name(helper: str) -> str:
    """The file name of a helper object's unit: c/helpers/gemm.c.j2 -> helpers_gemm.c."""
    return "helpers_" + helper.rsplit("/", 1)[-1].removesuffix(".c.j2") + ".c"


def helper_units(helpers: list[str], data: dict[str, Any]) -> dict[str, str]:
    """The unit of each shared helper among ``helpers`` (file name -> C), rendered with the
    helper templates' ``data`` and what the runtime support needs (``threads``,
    ``pool_threads``). Nothing of the model enters them: equal flags give equal units."""
    units = {}
    for helper in helpers:
        if helper in SHARED:
            units[unit_name(helper)] = render("c/helper_object.c.j2", {
                **data, "embedded": False, "rng_streams": 0, "helper_objects": True, "name": unit_name(helper),
                "declared": [render(h, {**data, "declare_only": True}) for h in SHARED[helper]],
                "defined": render(helper, {**data, "declare_only": False}),
            })
    return units
