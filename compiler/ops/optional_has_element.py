from .. import dtypes as dt
from .registry import OpDef, register


@register("OptionalHasElement", since=15)
class OptionalHasElement(OpDef):
    """True when the optional holds a value (a tensor or sequence input always does; no input never)."""
    foldable = False

    def infer(self, node, ctx):
        return [(dt.BOOL, ())]

    def lower(self, node, k):
        x = k.inputs[0] if k.has_input(0) else None
        if x is None or x.kind in ("tensor", "sequence"):
            return k.kernel("c/fill_scalar.c.j2", out=k.out.data(), value="1" if x is not None else "0")
        present = f"!{x.name}->none" + (f" && {x.name}->count > 0" if x.kind == "optional" else "")
        return k.kernel("c/fill_scalar.c.j2", out=k.out.data(), value=f"({present})")
