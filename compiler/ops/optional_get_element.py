from ._control import known_symbols, merged_dim
from ._sequence import require_rank
from .registry import OpDef, register


@register("OptionalGetElement", since=15)
class OptionalGetElement(OpDef):
    """The value an optional holds (an error if it is empty); a tensor or sequence is itself."""
    foldable = False
    allocates_outputs = True

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if x.kind == "optional":
            require_rank(node, x)
            known = known_symbols(node)
            return [(x.dtype, tuple(merged_dim(node, ctx.dims, f"0[{a}]", [d], known) for a, d in enumerate(x.shape)))]
        if x.kind == "optional_sequence":
            return [(x.dtype, x.shape, "sequence")]
        return [(x.dtype, x.shape, x.kind)]

    def inline(self, node):
        x = node.inputs[0] if node.inputs else None
        if x is not None and x.kind in ("tensor", "sequence"):
            return [], [x]  # nothing to unwrap
        return None

    def lower(self, node, k):
        x = k.input(0)
        if x.kind == "optional_sequence":
            return k.kernel("c/sequence_clone.c.j2", seq=x.data(), out=k.out.data(), check_none=True)
        return k.kernel("c/optional_get.c.j2", allocates=True, seq=x.data(),
                        out={"name": k.out.name, "dims": k.output_dims(0), "itemsize": k.out.dtype.itemsize})
