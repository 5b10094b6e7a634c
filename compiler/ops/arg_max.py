from ._reduce import ArgReduce
from .registry import register


@register("ArgMax", since=1)
class ArgMax(ArgReduce):
    """reduced = index of the largest element along axis (NaN counts as largest)."""
    better_float = ("v > best_v || (v != v && best_v == best_v)", "v != v || (best_v == best_v && v >= best_v)")
    better_int = ("v > best_v", "v >= best_v")
