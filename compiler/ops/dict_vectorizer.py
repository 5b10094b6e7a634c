from ...codegen import cexpr
from ...codegen.names import c_string
from .. import dtypes as dt
from ._map import ANY_VALUE, map_input
from .registry import OpDef, register


@register("DictVectorizer", since=1, domain="ai.onnx.ml")
class DictVectorizer(OpDef):
    """Y[0, j] = X[vocabulary[j]], or 0 ("" for strings) where the map lacks that key; keys
    outside the vocabulary are ignored."""

    @staticmethod
    def vocabulary(node) -> list:
        strings = node.attrs.get("string_vocabulary")
        return list(strings) if strings else [int(v) for v in node.attrs.get("int64_vocabulary") or ()]

    def infer(self, node, ctx):
        strings, ints = node.attrs.get("string_vocabulary"), node.attrs.get("int64_vocabulary")
        if bool(strings) == bool(ints):
            raise ctx.fail("give one of string_vocabulary and int64_vocabulary")
        x = map_input(ctx, (dt.STRING,) if strings else (dt.INT64,), ANY_VALUE)
        return [(x.dtype, (1, len(self.vocabulary(node))))]

    def lower(self, node, k):
        x, y = k.input(0), k.out
        vocabulary = self.vocabulary(node)
        string_keys = bool(node.attrs.get("string_vocabulary"))
        words = [c_string(w, limit=None) for w in vocabulary] if string_keys else [cexpr.lit(v) for v in vocabulary]
        return k.kernel("c/dict_vectorizer.c.j2", X=x.name, Y=y.name, key_ctype=x.data()["key_ctype"],
                        value_ctype=y.ctype, vocabulary=words, string_keys=string_keys,
                        zero='""' if y.dtype is dt.STRING else "0")
