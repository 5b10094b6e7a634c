from ...codegen.literals import c_literal
from .. import dtypes as dt
from .registry import OpDef, register


@register("StringNormalizer", since=10)
class StringNormalizer(OpDef):
    """Drops ``stopwords`` (case-insensitively unless ``is_case_sensitive``) from a [C] or [1, C]
    string tensor, then maps case (LOWER, UPPER, NONE; ASCII letters). If every string is dropped
    the result is one empty string."""
    foldable = False

    def infer(self, node, ctx):
        x = ctx.inp(0)
        if x.dtype is not dt.STRING:
            raise ctx.fail(f"X must be string, not {x.dtype}")
        if x.rank not in (1, 2) or (x.rank == 2 and x.shape[0] != 1):
            raise ctx.fail(f"X must have shape [C] or [1, C], not {x.shape}")
        action = node.attrs.get("case_change_action", "NONE")
        if action not in ("LOWER", "UPPER", "NONE"):
            raise ctx.fail(f"unknown case_change_action {action!r}")
        kept = ctx.dims.data(f"{node.label} kept strings")
        return [(dt.STRING, (1, kept) if x.rank == 2 else (kept,))]

    def _data(self, node, k):
        return {"x": k.input(0).data(), "stopwords": [c_literal(w, dt.STRING) for w in node.attrs.get("stopwords") or ()],
                "case_sensitive": bool(node.attrs.get("is_case_sensitive", 0)),
                "action": node.attrs.get("case_change_action", "NONE")}

    def lower(self, node, k):
        kernel = k.kernel("c/string_normalizer.c.j2", y=k.out.data(), shape=False, **self._data(node, k))
        kernel.shape_template = "c/string_normalizer.c.j2"
        kernel.shape_data = self._data(node, k) | {"shape": True, "ptr": k.data_dim_ptr(k.out.dims[-1]),
                                                    "y": k.out.data()}
        kernel.helpers.append("c/helpers/strings.c.j2")
        return kernel
