from __future__ import annotations

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import float_literal
from .. import dtypes as dt
from ..errors import UnsupportedError
from ..ir import Node
from .registry import InferContext, OpDef, register


class _Gram:
    """A trie node: the n-gram spelled by the path to it, and its output column (-1: none)."""

    def __init__(self) -> None:
        self.children: dict[int, _Gram] = {}
        self.column = -1


class _Trie:
    """The pool's n-grams as a trie numbered breadth first, children of a node contiguous and sorted."""

    def __init__(self, pool: list[int], counts: list[int], indexes: list[int], min_len: int, max_len: int):
        root = _Gram()
        ngram_id = 0
        for size, start in enumerate(counts, start=1):
            end = counts[size] if size < len(counts) else len(pool)
            grams = max(end - start, 0) // size
            for g in range(grams):
                if min_len <= size <= max_len:
                    node = root
                    for token in pool[start + g * size:start + (g + 1) * size]:
                        node = node.children.setdefault(token, _Gram())
                    node.column = indexes[ngram_id]
                ngram_id += 1
        self.tokens, self.columns, self.first, self.last = [0], [-1], [], []
        queue = [root]
        for node in queue:
            self.first.append(len(self.tokens))
            for token in sorted(node.children):
                child = node.children[token]
                self.tokens.append(token)
                self.columns.append(child.column)
                queue.append(child)
            self.last.append(len(self.tokens))


@register("TfIdfVectorizer", since=9)
class TfIdfVectorizer(OpDef):
    """Y = counts of the pool's n-grams (with skips) in each row of X, weighted by mode TF, IDF or TFIDF."""

    def _check(self, node: Node, ctx: InferContext) -> int:
        """The output row size, max(ngram_indexes) + 1."""
        a = node.attrs
        if a.get("pool_strings"):
            raise UnsupportedError(f"{node.label}: string pools are not supported")
        if a.get("mode") not in ("TF", "IDF", "TFIDF"):
            raise ctx.fail(f"mode must be TF, IDF or TFIDF, got {a.get('mode')!r}")
        indexes, pool = a.get("ngram_indexes", ()), a.get("pool_int64s", ())
        if not indexes or min(indexes) < 0:
            raise ctx.fail("ngram_indexes must be non-empty and non-negative")
        min_len, max_len = a.get("min_gram_length", 0), a.get("max_gram_length", 0)
        if not 1 <= min_len <= max_len:
            raise ctx.fail(f"need 1 <= min_gram_length ({min_len}) <= max_gram_length ({max_len})")
        if a.get("max_skip_count", 0) < 0:
            raise ctx.fail("max_skip_count must be non-negative")
        counts = list(a.get("ngram_counts", ()))
        grams = sum(max((counts[i + 1] if i + 1 < len(counts) else len(pool)) - c, 0) // (i + 1)
                    for i, c in enumerate(counts))
        if grams > len(indexes) or any(not 0 <= c <= len(pool) for c in counts):
            raise ctx.fail("ngram_counts do not fit pool_int64s and ngram_indexes")
        size = max(indexes) + 1
        weights = a.get("weights", ())
        if weights and len(weights) < size:
            raise ctx.fail(f"weights has {len(weights)} values, the output rows {size}")
        return size

    def infer(self, node, ctx):
        size = self._check(node, ctx)
        x = ctx.inp(0)
        if x.dtype not in (dt.INT32, dt.INT64):
            raise ctx.fail(f"X must be int32 or int64 (got {x.dtype})")
        if len(x.shape) > 2:
            raise ctx.fail(f"X must be 1-D or 2-D, got shape {x.shape}")
        return [(dt.FLOAT, (x.shape[0], size) if len(x.shape) == 2 else (size,))]

    def lower(self, node: Node, k: KernelContext) -> Kernel:
        size = self._check(node, InferContext(node, None))
        a = node.attrs
        x = k.input(0)
        trie = _Trie(list(a.get("pool_int64s", ())), list(a.get("ngram_counts", ())), list(a["ngram_indexes"]),
                     a["min_gram_length"], a["max_gram_length"])
        weights = a.get("weights", ())
        kernel = k.kernel(
            "c/tf_idf_vectorizer.c.j2", X=x.name, Y=k.out.name,
            rows=cexpr.lit(x.dims[0]) if x.rank == 2 else 1, C=cexpr.lit(x.dims[-1]) if x.rank else 1,
            size=size, mode=a["mode"], weights=[float_literal(w, "float") for w in weights[:size]],
            min_len=a["min_gram_length"], max_len=a["max_gram_length"], max_skip=a.get("max_skip_count", 0),
            tokens=[cexpr.lit(t) for t in trie.tokens], columns=trie.columns, first=trie.first, last=trie.last)
        kernel.scratch = {"counts": 8 * size}
        return kernel
