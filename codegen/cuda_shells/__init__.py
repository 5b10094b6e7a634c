"""What each CUDA shell decides, in Python: how its kernel is launched, which variant of the shell
renders, and which of the C build's scratch buffers it does without.

A kernel family with a CUDA template (``templates/cuda/<family>.cu.j2``, a loop shell around the
body it shares with ``templates/c/<family>.c.j2``) has one function here, registered under the
family's name with ``@shell``. It takes the data the template gets (the C template's data, the
tensors, ``scratch``: the names of the C build's scratch buffers) and returns a :class:`Shell`.
The CUDA emitter puts it on the node's ``Kernel``, launches the kernel as it says, allocates only
the scratch it keeps, and passes it to the template as ``shell`` (``shell.variant``); the template
sets nothing about its launch or its scratch.

A launch's ``items`` is a C expression written where the kernel is launched, not in its body, so
what it names does not make parameters of the node function (the emitter calls these functions
while it records into a throwaway ``Reads``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from .. import steps as st


@dataclass(frozen=True)
class Shell:
    """How a family's CUDA shell runs one node."""
    launch: Optional[st.Launch]    # None: this variant runs the C loops in one thread
    variant: str = ""              # which variant of the shell renders (the template branches on it)
    drops: frozenset[str] = frozenset()   # the C build's scratch buffers this variant does not use
    details: Mapping[str, Any] = field(default_factory=dict)   # what else the choice computed, for the body

    def data(self) -> dict[str, Any]:
        """Plain template data."""
        return {"variant": self.variant, **self.details}


ShellFunction = Callable[[dict[str, Any]], Shell]
SHELLS: dict[str, ShellFunction] = {}


def shell(family: str) -> Callable[[ShellFunction], ShellFunction]:
    """Register the decisions of ``templates/cuda/<family>.cu.j2``."""
    def register(fn: ShellFunction) -> ShellFunction:
        if family in SHELLS:
            raise ValueError(f"internal: two shells for the CUDA family {family!r}")
        SHELLS[family] = fn
        return fn
    return register


def decide(family: str, data: dict[str, Any]) -> Optional[Shell]:
    """The shell of ``family`` for a node with this template data; None where the family has no
    registered shell (it runs the C loops in one thread)."""
    fn = SHELLS.get(family)
    return None if fn is None else fn(data)


def grid(items: Any, variant: str = "", drops: Iterable[str] = (), threads: int = 256) -> Shell:
    """A thread per item, in grid-stride loops."""
    return Shell(st.Launch(str(items), threads, threads, False), variant, frozenset(drops))


def blocks(items: Any, variant: str = "", drops: Iterable[str] = (), threads: int = 256) -> Shell:
    """A block per item, its threads meeting at barriers."""
    return Shell(st.Launch(str(items), threads, 1, True), variant, frozenset(drops))


def one_block(variant: str = "", drops: Iterable[str] = (), threads: int = 256) -> Shell:
    """One block of ``threads``, its threads meeting at barriers (no barrier spans blocks)."""
    return blocks(1, variant, drops, threads)


def serial(variant: str = "serial") -> Shell:
    """The C loops in one thread."""
    return Shell(None, variant)


def at_least_one(total: Any) -> str:
    """``(total > 0 ? total : 1)``: a launch that still runs the checks of an empty tensor."""
    return f"({total} > 0 ? {total} : 1)"


def is_const(dim: Any) -> bool:
    """A dim known when compiling (a number)."""
    return str(dim).isdigit()


def at(item: Any, name: str) -> Any:
    """``item.name`` as a template reads it: a dict's entry, else an attribute."""
    return item[name] if isinstance(item, dict) else getattr(item, name)


def product(dims: Iterable[Any]) -> str:
    """``(d0) * (d1) * ...``: the items of a walk over ``dims``."""
    return "(" + ") * (".join(str(d) for d in dims) + ")"


from . import maps, matrices, rows   # noqa: E402,F401  (the families register themselves)
