"""Shells of the families that give each output element a thread of its own, in grid-stride loops."""
from __future__ import annotations

from typing import Any

from . import Shell, at, at_least_one, grid, product, serial, shell


def _loops(d: dict[str, Any]) -> str:
    """The items of a walk over ``loops`` (``1`` for a single element, no loop)."""
    return product(at(loop, "n") for loop in d["loops"]) if d["loops"] else "1"


def _checked(total: str, checks: Any) -> str:
    """A launch that runs checks runs one thread even without elements."""
    return at_least_one(total) if checks else total


@shell("affine_grid")
def affine_grid(d: dict[str, Any]) -> Shell:
    total = f"({d['N']}) * " + " * ".join(f"({at(a, 'size')})" for a in d["axes"]) + f" * {d['R']}"
    return grid(_checked(total, d["batch"]))


@shell("array_feature_extractor")
def array_feature_extractor(d: dict[str, Any]) -> Shell:
    return grid(f"({d['rows']}) * ({d['count']})")


@shell("causal_conv_with_state")
def causal_conv_with_state(d: dict[str, Any]) -> Shell:
    return grid(f"({d['B']}) * ({d['C']}) * (({d['L']}) + ({d['carry']}))")


@shell("center_crop_pad")
def center_crop_pad(d: dict[str, Any]) -> Shell:
    return grid(d["numel"], "elements") if d["loops"] else grid("1", "one_element")


@shell("col2im")
def col2im(d: dict[str, Any]) -> Shell:
    return grid(at_least_one(d["outputs"][0]["numel"]))


@shell("concat")
def concat(d: dict[str, Any]) -> Shell:
    return grid(d["out_block"] if d["outer"] == "1" else f"({d['outer']}) * ({d['out_block']})")


@shell("copy")
def copy(d: dict[str, Any]) -> Shell:
    count = d["count"]
    return grid(f"({count}) > 0 ? ({count}) : 1" if d.get("checks") else count)


@shell("dropout")
def dropout(d: dict[str, Any]) -> Shell:
    return grid(_checked(d["count"], d["training_check"]))


def _elementwise(d: dict[str, Any], checked: bool = False) -> Shell:
    """The elementwise map: a flat walk where no operand broadcasts (run in one thread when it is
    too small to spread, ``parallel`` false), else a walk over the output's dims."""
    if d["flat"] and not d["parallel"]:
        return serial()
    return grid(_checked(d["n"] if d["flat"] else product(d["dims"]), checked), "flat" if d["flat"] else "broadcast")


@shell("elementwise")
def elementwise(d: dict[str, Any]) -> Shell:
    return _elementwise(d)


@shell("nonzero_divisor")
def nonzero_divisor(d: dict[str, Any]) -> Shell:
    return _elementwise(d)


@shell("prelu")
def prelu(d: dict[str, Any]) -> Shell:
    """The elementwise map, after the checks of the slope dims known only at run time."""
    if d["flat"] and not d["parallel"]:
        return serial()
    return _elementwise(d, bool(d["checks"]))


@shell("eye_like")
def eye_like(d: dict[str, Any]) -> Shell:
    return grid(f"({d['rows']}) * ({d['cols']})")


@shell("fill")
def fill(d: dict[str, Any]) -> Shell:
    return grid(d["count"])


@shell("gather")
def gather(d: dict[str, Any]) -> Shell:
    return grid(f"({d['outer']}) * ({d['count']}) * ({d['inner']})")


@shell("gather_elements")
def gather_elements(d: dict[str, Any]) -> Shell:
    return grid(_checked(product(at(loop, "n") for loop in d["loops"]), d["checks"]))


@shell("gather_nd")
def gather_nd(d: dict[str, Any]) -> Shell:
    return grid(f"({d['batches']}) * ({d['tuples']}) * ({d['slice']})")


@shell("grid_sample")
def grid_sample(d: dict[str, Any]) -> Shell:
    return grid(_checked(f"({d['N']}) * ({d['C']}) * ({d['P']})", d["check"]))


@shell("imputer")
def imputer(d: dict[str, Any]) -> Shell:
    return grid(d["total"])


@shell("linear_model")
def linear_model(d: dict[str, Any]) -> Shell:
    """A row's scores go to its own row of the score output, not to the C build's shared scratch."""
    return grid(d["N"], drops=[d["scratch"][0]])


@shell("lrn")
def lrn(d: dict[str, Any]) -> Shell:
    return grid(f"({d['N']}) * ({d['C']}) * ({d['S']})")


@shell("mel")
def mel(d: dict[str, Any]) -> Shell:
    return grid(at_least_one(d["outputs"][0]["numel"]))


@shell("one_hot")
def one_hot(d: dict[str, Any]) -> Shell:
    return grid(f"({d['outer']}) * ({d['depth']}) * ({d['inner']})")


@shell("one_hot_encoder")
def one_hot_encoder(d: dict[str, Any]) -> Shell:
    return grid(f"({d['total']}) * {d['count']}")


@shell("optimizer")
def optimizer(d: dict[str, Any]) -> Shell:
    return grid("(" + " + ".join(f"({at(u, 'n')})" for u in d["tensors"]) + ")")


@shell("pad")
def pad(d: dict[str, Any]) -> Shell:
    """Each thread finds its source element itself: no tables of the C kernel."""
    checked = d["runtime"] or (d["maps"] and d["mode"] != 0)
    return grid(_checked(_loops(d), checked), drops=[d["scratch"][0]] if d["maps"] else [])


@shell("pool")
def pool(d: dict[str, Any]) -> Shell:
    return grid(f"({d['NC']}) * ({d['OUT']})")


@shell("pool_planes")
def pool_planes(d: dict[str, Any]) -> Shell:
    """Each thread reads its window from the input: no planes of the C kernel."""
    return grid(d["NC"] * d["OH"] * d["OW"], drops=[d["scratch"][0]])


@shell("quantize")
def quantize(d: dict[str, Any]) -> Shell:
    return grid(f"({d['outer']}) * ({d['along']}) * ({d['inner']})")


@shell("range")
def range_(d: dict[str, Any]) -> Shell:
    return grid(d["count"])


@shell("resize")
def resize(d: dict[str, Any]) -> Shell:
    """Antialiasing (a number of taps known only at run time) runs the C loops."""
    if d["antialias"]:
        return serial()
    tables = d["tables"]
    checked = d["aspect"] or any(at(t, "check") for t in tables) or any(at(t, "empty_check") for t in tables)
    return grid(_checked(product(at(loop, "out") for loop in d["loops"]), checked))


@shell("reverse_sequence")
def reverse_sequence(d: dict[str, Any]) -> Shell:
    total = f"({d['batches']}) * ({d['steps']}) * ({d['inner']})"
    return grid(_checked(f"({total} > {d['batches']} ? {total} : {d['batches']})", d["checks"]))


@shell("roi_align")
def roi_align(d: dict[str, Any]) -> Shell:
    """Each thread sums its own bin: no accumulators of the C kernel."""
    total = f"({d['R']}) * ({d['C']}) * {d['PH']} * {d['PW']}"
    return grid(_checked(f"({total} > {d['R']} ? {total} : {d['R']})", d["check"]), drops=[d["scratch"][0]])


@shell("rotary")
def rotary(d: dict[str, Any]) -> Shell:
    return grid(f"({d['B']}) * ({d['S']}) * ({d['H']}) * {d['head']}")


@shell("scaler")
def scaler(d: dict[str, Any]) -> Shell:
    return grid(d["total"])


@shell("split")
def split(d: dict[str, Any]) -> Shell:
    total = d["in_block"] if d["outer"] == "1" else f"({d['outer']}) * ({d['in_block']})"
    return grid(f"(({total}) > 0 ? ({total}) : 1)" if d["checks"] else total)


def _strided(d: dict[str, Any]) -> Shell:
    return grid(_loops(d), "elements") if d["loops"] else grid("1", "one_element")


@shell("strided_copy")
def strided_copy(d: dict[str, Any]) -> Shell:
    return _strided(d)


@shell("slice")
def slice_(d: dict[str, Any]) -> Shell:
    """The plan of ``c/slice_plan.c.j2``, then the strided copy."""
    return _strided(d)


@shell("tile")
def tile(d: dict[str, Any]) -> Shell:
    return _strided(d)


@shell("svm")
def svm(d: dict[str, Any]) -> Shell:
    """A thread per row, its votes and scores in local arrays; past 8 KiB of them, the C loops."""
    local_bytes = 0
    if d["kind"] == "classifier":
        classes = d["classes"]
        pairs = classes * (classes - 1) // 2
        local_bytes = ((8 * pairs + 8 * classes if d["svc"] else 0)
                       + (4 * (2 * classes * classes + pairs + classes) if d["proba"] else 0))
    return serial() if local_bytes > 8192 else grid(d["N"], "thread_per_row")


@shell("tensor_scatter")
def tensor_scatter(d: dict[str, Any]) -> Shell:
    total = d["numel"]
    items = f"({total} > {d['B']} ? {total} : {d['B']})" if not d["circular"] and d["indices"] else total
    return grid(_checked(items, d["checks"]))


@shell("tree_ensemble")
def tree_ensemble(d: dict[str, Any]) -> Shell:
    """A thread per row, its scores in local arrays; past 8 KiB of them, the C loops."""
    targets = d["targets"]
    local_bytes = targets * ((8 if d["tt"] == "double" else 4) + 1) + 4 * max(targets, 2)
    return serial() if local_bytes > 8192 else grid(d["N"], "thread_per_row")


@shell("trilu")
def trilu(d: dict[str, Any]) -> Shell:
    return grid(f"({d['matrices']}) * ({d['rows']}) * ({d['cols']})")


@shell("window")
def window(d: dict[str, Any]) -> Shell:
    return grid(d["size"])
