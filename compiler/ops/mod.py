from .. import dtypes as dt
from ._binary import Broadcasting, nonzero_divisor_kernel
from .registry import register


@register("Mod", since=10)
class Mod(Broadcasting):
    """C = A mod B, broadcasting: the sign of B (fmod=0) or of A (fmod=1, C's fmod and %)."""
    types = dt.NUMERIC

    def scalar(self, a, b, node, t):
        d = t.dtype
        if node.attrs.get("fmod", 0):
            if d.is_float:
                return f"{'fmod' if d.compute == 'double' else 'fmodf'}({a}, {b})"
            if d.kind == "int" and d.itemsize >= 4:  # INT_MIN % -1 overflows
                return f"({b} == -1 ? 0 : {a} % {b})"
            return f"{a} % {b}"
        if d.is_float:
            return f"onnxc_mod_floor_{'f64' if d.compute == 'double' else 'f32'}({a}, {b})"
        if d.kind == "int":
            return f"({d.c_type})onnxc_mod_floor_i64({a}, {b})"
        return f"{a} % {b}"

    def lower(self, node, k):
        a, b = self.operands(node, k)
        kernel = nonzero_divisor_kernel(k, [a, b], lambda v: self.scalar(v[0], v[1], node, a), b,
                                        "Mod: integer modulo by zero")
        if not node.attrs.get("fmod", 0):
            kernel.helpers.append("c/helpers/mod.c.j2")
        return kernel
