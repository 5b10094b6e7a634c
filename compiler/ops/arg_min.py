from ._reduce import ArgReduce
from .registry import register


@register("ArgMin", since=1)
class ArgMin(ArgReduce):
    """reduced = index of the smallest element along axis (NaN counts as smallest)."""
    better_float = ("v < best_v || (v != v && best_v == best_v)", "v != v || (best_v == best_v && v <= best_v)")
    better_int = ("v < best_v", "v <= best_v")
