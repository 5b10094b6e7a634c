"""What the random operators share: output types, the seed attribute as a key, and their
kernels' data (c/random.c.j2, c/helpers/random.c.j2).

A node with a ``seed`` attribute draws the same sequence in every new session: its key comes
from the seed, and each run of a session draws from the next run number. A node without one
draws from the session's seed (``onnxc.set_seed``'s, else a fresh one per session)."""
from __future__ import annotations

import math
import struct
from typing import Any

from ...codegen import cexpr
from ...codegen.kernel import KernelContext, TensorRef
from .. import dtypes as dt
from ..ir import Node
from .registry import InferContext, OpDef

HELPER = "c/helpers/random.c.j2"
FLOATS_1 = (dt.FLOAT, dt.DOUBLE, dt.FLOAT16)   # the float types of the version-1 schemas
FLOATS_22 = FLOATS_1 + (dt.BFLOAT16,)


def float_types(node: Node) -> tuple[dt.DType, ...]:
    return FLOATS_22 if node.version >= 22 else FLOATS_1


def seed_key(seed: Any) -> int:
    """The 64-bit seed of the generator: an int seed as it is, a float seed by its float32 bits."""
    if isinstance(seed, float):
        return struct.unpack("<I", struct.pack("<f", seed))[0]
    return int(seed) % 2**64


def key_data(node: Node, k: KernelContext) -> dict[str, Any]:
    """Template data naming the node's generator (see ``seed_data``), refusing a build that
    cannot draw."""
    stream = k.random_stream()
    if stream is None:
        raise k.unsupported("this build cannot draw random numbers (CUDA builds keep no generator state)")
    return seed_data(node, stream)


def seed_data(node: Node, stream: int) -> dict[str, Any]:
    """Template data naming the node's generator: its slot in the context and its seed."""
    seed = node.attrs.get("seed")
    return {"stream": stream, "seeded": int(seed is not None),
            "seed": f"0x{seed_key(seed) if seed is not None else 0:016x}ull"}


def check_finite(ctx: InferContext, node: Node, *names: str) -> None:
    """The float attributes a kernel writes into C as literals must be finite."""
    for name in names:
        if not math.isfinite(node.attrs[name]):
            raise ctx.fail(f"attribute {name!r} must be finite, not {node.attrs[name]}")


class RandomOp(OpDef):
    """Every run gives new values: never folded into a constant."""
    foldable = False


def draw_kernel(node: Node, k: KernelContext, dist: str, a: float, b: float,
                probs: TensorRef | None = None) -> Any:
    """c/random.c.j2: element i of the output from the draw of element i. ``dist`` "uniform":
    a + (b - a) u; "normal": a + b z; "bernoulli": 1 where u < probs[i]."""
    y = k.out
    low, span = float(a), float(b) - float(a) if dist == "uniform" else float(b)
    value = {"uniform": f"{low.hex()} + {span.hex()} * onnxc_rand_uniform(key, run, (uint64_t)i)",
             "normal": f"{low.hex()} + {span.hex()} * onnxc_rand_normal(key, run, (uint64_t)i)",
             "bernoulli": f"(onnxc_rand_uniform(key, run, (uint64_t)i) < (double)({probs.load('i') if probs else ''}) "
                          "? 1 : 0)"}[dist]
    return k.kernel("c/random.c.j2", helpers=(HELPER,), output=y.name, count=cexpr.lit(y.numel),
                    store=y.store(f"({y.compute})({value})"), **key_data(node, k))
