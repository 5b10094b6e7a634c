"""Tree ensembles as data tables: the trees of TreeEnsembleRegressor, TreeEnsembleClassifier
(ai.onnx.ml 1-3, with the *_as_tensor attributes of opset 3) and TreeEnsemble (opset 5) become
constant arrays that one C loop walks, so big forests compile as fast as small ones.

Node i of the table is a leaf when ``mode[i] == LEAF``; then ``true[i]`` is its first weight and
``false[i]`` its weight count. A branch compares X[feature[i]] with threshold[i] and goes to
``true[i]`` or ``false[i]``; MISSING in the mode sends a NaN feature to the true branch.

The aggregation, base values, post transforms and the binary-classifier rules follow
onnxruntime's tree_ensemble_common.h / tree_ensemble_aggregator.h: scores accumulate in the
threshold type (double for double inputs, else float), a score that no leaf touched reads as 0,
and transforms other than NONE are computed in float.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...codegen import cexpr
from ...codegen.kernel import Kernel, KernelContext
from ...codegen.literals import c_literal, c_literals
from ...codegen.names import c_string
from .. import dtypes as dt
from ..errors import ModelError
from ..ir import Node
from . import _ml

LEAF, LEQ, LT, GTE, GT, EQ, NEQ = range(7)
MISSING = 16  # flag: a NaN feature takes the true branch
MODE_NAMES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT, "BRANCH_EQ": EQ,
              "BRANCH_NEQ": NEQ, "LEAF": LEAF}
V5_MODES = {0: LEQ, 1: LT, 2: GTE, 3: GT, 4: EQ, 5: NEQ}  # 6 is BRANCH_MEMBER
V5_MEMBER = 6
C_OPS = {LEQ: "<=", LT: "<", GTE: ">=", GT: ">", EQ: "==", NEQ: "!="}
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # the order of TreeEnsemble's aggregate_function codes
V5_TRANSFORMS = {0: _ml.NONE, 1: _ml.SOFTMAX, 2: _ml.LOGISTIC, 3: _ml.SOFTMAX_ZERO, 4: _ml.PROBIT}
MAX_NODES = 2**31 - 1


@dataclass
class Forest:
    """The table form of an ensemble (plain Python lists)."""
    feature: list = field(default_factory=list)
    threshold: list = field(default_factory=list)
    mode: list = field(default_factory=list)
    true: list = field(default_factory=list)
    false: list = field(default_factory=list)
    roots: list = field(default_factory=list)
    target: list = field(default_factory=list)   # per leaf weight: the target or class
    weight: list = field(default_factory=list)
    reachable: list = field(default_factory=list)  # table entries some root reaches (set by check_acyclic)

    def add(self, feature: int, threshold: float, mode: int, true: int = 0, false: int = 0) -> int:
        self.feature.append(feature)
        self.threshold.append(threshold)
        self.mode.append(mode)
        self.true.append(true)
        self.false.append(false)
        if len(self.mode) > MAX_NODES:
            raise ModelError("the tree ensemble has too many nodes")
        return len(self.mode) - 1

    def check_acyclic(self, label: str) -> None:
        """Every walk from a root must end at a leaf (the model is untrusted)."""
        state = bytearray(len(self.mode))  # 0 new, 1 on the current path, 2 done
        for root in self.roots:
            if state[root]:
                continue
            stack = [(root, 0)]
            state[root] = 1
            while stack:
                i, step = stack.pop()
                if self.mode[i] == LEAF or step == 2:
                    state[i] = 2
                    continue
                stack.append((i, step + 1))
                child = self.true[i] if step == 0 else self.false[i]
                if state[child] == 1:
                    raise ModelError(f"{label}: a tree has a cycle (node table entry {child})")
                if state[child] == 0:
                    state[child] = 1
                    stack.append((child, 0))
        self.reachable = [i for i, s in enumerate(state) if s == 2]

    def branch_features(self) -> list[int]:
        return [self.feature[i] for i in self.reachable if self.mode[i] != LEAF]

    def branch_modes(self) -> set[int]:
        return {self.mode[i] for i in self.reachable if self.mode[i] != LEAF}


def _ints(node: Node, name: str) -> list[int]:
    return [int(v) for v in node.attrs.get(name, ())]


_RECENT: list = []  # (node, attrs, kind, forest): inference and lowering of a node share its table


def _cached(node: Node, kind: str, build) -> Forest:
    for n, attrs, k, forest in _RECENT:
        if n is node and attrs is node.attrs and k == kind:
            return forest
    forest = build()
    _RECENT.append((node, node.attrs, kind, forest))
    del _RECENT[:-4]
    return forest


def v3_forest(node: Node, classifier: bool) -> Forest:
    """TreeEnsembleRegressor / TreeEnsembleClassifier attributes as a table (onnxruntime's reading)."""
    return _cached(node, "classifier" if classifier else "regressor", lambda: _v3_forest(node, classifier))


def _v3_forest(node: Node, classifier: bool) -> Forest:
    label = node.label
    tree_ids, node_ids = _ints(node, "nodes_treeids"), _ints(node, "nodes_nodeids")
    features, modes = _ints(node, "nodes_featureids"), list(node.attrs.get("nodes_modes", ()))
    true_ids, false_ids = _ints(node, "nodes_truenodeids"), _ints(node, "nodes_falsenodeids")
    values = _ml.floats(node, "nodes_values", "nodes_values_as_tensor")
    values = [] if values is None else list(values)
    missing = _ints(node, "nodes_missing_value_tracks_true")
    n = len(node_ids)
    for name, seq in (("nodes_treeids", tree_ids), ("nodes_featureids", features), ("nodes_modes", modes),
                      ("nodes_truenodeids", true_ids), ("nodes_falsenodeids", false_ids), ("nodes_values", values)):
        if len(seq) != n:
            raise ModelError(f"{label}: {name} has {len(seq)} entries, nodes_nodeids {n}")
    prefix = "class" if classifier else "target"
    t_ids, t_nodes, t_trees = _ints(node, f"{prefix}_ids"), _ints(node, f"{prefix}_nodeids"), \
        _ints(node, f"{prefix}_treeids")
    t_weights = _ml.floats(node, f"{prefix}_weights", f"{prefix}_weights_as_tensor")
    t_weights = [] if t_weights is None else list(t_weights)
    if not (len(t_ids) == len(t_nodes) == len(t_trees) == len(t_weights)):
        raise ModelError(f"{label}: {prefix}_ids, {prefix}_nodeids, {prefix}_treeids and {prefix}_weights "
                         "differ in length")

    where = dict(zip(zip(tree_ids, node_ids), range(n)))
    if len(where) != n:
        seen: set = set()
        for key in zip(tree_ids, node_ids):
            if key in seen:
                raise ModelError(f"{label}: node {key[1]} of tree {key[0]} is defined twice")
            seen.add(key)
    unknown = set(modes) - MODE_NAMES.keys()
    if unknown:
        raise ModelError(f"{label}: unknown node mode {min(unknown)!r}")
    mode = [MODE_NAMES[m] for m in modes]
    negative = [f for f, m in zip(features, mode) if f < 0 and m != LEAF]
    if negative:
        raise ModelError(f"{label}: negative feature id {negative[0]}")
    for i, flag in enumerate(missing[:n]):
        if flag == 1 and mode[i] != LEAF:
            mode[i] |= MISSING
    true, false = [0] * n, [0] * n
    for i in range(n):
        if mode[i] == LEAF:
            continue
        t, f = where.get((tree_ids[i], true_ids[i])), where.get((tree_ids[i], false_ids[i]))
        if t is None or f is None:
            missing_id = true_ids[i] if t is None else false_ids[i]
            raise ModelError(f"{label}: node {missing_id} of tree {tree_ids[i]} does not exist")
        if t == i or f == i:
            raise ModelError(f"{label}: node {node_ids[i]} of tree {tree_ids[i]} points to itself")
        true[i], false[i] = t, f
    forest = Forest(features, values, mode, true, false)
    # Leaf weights in (tree, node, attribute position) order; weights of branch nodes are ignored.
    order = sorted(range(len(t_ids)), key=lambda j: (t_trees[j], t_nodes[j], j))
    for j in order:
        i = where.get((t_trees[j], t_nodes[j]))
        if i is None:
            raise ModelError(f"{label}: weight for node {t_nodes[j]} of tree {t_trees[j]}, which does not exist")
        if forest.mode[i] != LEAF:
            continue
        if forest.false[i] == 0:
            forest.true[i] = len(forest.weight)
        forest.false[i] += 1
        forest.target.append(t_ids[j])
        forest.weight.append(t_weights[j])
    for i in range(n):
        if forest.mode[i] == LEAF and forest.false[i] == 0:
            raise ModelError(f"{label}: leaf {node_ids[i]} of tree {tree_ids[i]} has no weight")
    # A tree starts wherever the tree id changes from the previous node, as in onnxruntime.
    forest.roots = [i for i in range(n) if i == 0 or tree_ids[i] != tree_ids[i - 1]]
    forest.check_acyclic(label)
    return forest


def _tensor(node: Node, name: str) -> np.ndarray | None:
    v = node.attrs.get(name)
    return None if v is None else np.asarray(v).reshape(-1)


def v5_forest(node: Node) -> Forest:
    """TreeEnsemble (opset 5) attributes as a table; BRANCH_MEMBER becomes a chain of BRANCH_EQ nodes."""
    return _cached(node, "v5", lambda: _v5_forest(node))


def _v5_forest(node: Node) -> Forest:
    label = node.label
    roots = _ints(node, "tree_roots")
    features = _ints(node, "nodes_featureids")
    splits = _tensor(node, "nodes_splits")
    modes = _tensor(node, "nodes_modes")
    true_ids, false_ids = _ints(node, "nodes_truenodeids"), _ints(node, "nodes_falsenodeids")
    true_leaf, false_leaf = _ints(node, "nodes_trueleafs"), _ints(node, "nodes_falseleafs")
    targets, weights = _ints(node, "leaf_targetids"), _tensor(node, "leaf_weights")
    missing = _ints(node, "nodes_missing_value_tracks_true")
    members = _tensor(node, "membership_values")
    n = len(features)
    if splits is None or modes is None or weights is None:
        raise ModelError(f"{label}: nodes_splits, nodes_modes and leaf_weights are required")
    for name, seq in (("nodes_splits", splits), ("nodes_modes", modes), ("nodes_truenodeids", true_ids),
                      ("nodes_falsenodeids", false_ids), ("nodes_trueleafs", true_leaf),
                      ("nodes_falseleafs", false_leaf)):
        if len(seq) != n:
            raise ModelError(f"{label}: {name} has {len(seq)} entries, nodes_featureids {n}")
    if missing and len(missing) != n:
        raise ModelError(f"{label}: nodes_missing_value_tracks_true has {len(missing)} entries, expected {n}")
    if len(targets) != len(weights):
        raise ModelError(f"{label}: leaf_targetids and leaf_weights differ in length")
    sets: dict[int, list[float]] = {}
    member_nodes = [i for i in range(n) if int(modes[i]) == V5_MEMBER]
    if member_nodes:
        values = [] if members is None else [float(v) for v in members.astype(np.float64)]
        groups, current = [], []
        for v in values:
            if np.isnan(v):
                groups.append(current)
                current = []
            else:
                current.append(v)
        if current:
            groups.append(current)
        if len(groups) < len(member_nodes):
            raise ModelError(f"{label}: membership_values has {len(groups)} sets for {len(member_nodes)} "
                             "BRANCH_MEMBER nodes")
        sets = dict(zip(member_nodes, groups))

    forest = Forest()
    n_leaves = len(weights)
    # Table: the n nodes, then one entry per leaf, then the extra nodes of membership chains.
    for i in range(n):
        code = int(modes[i])
        if code not in V5_MODES and code != V5_MEMBER:
            raise ModelError(f"{label}: unknown node mode {code}")
        if features[i] < 0:  # every entry of nodes_* is a branch
            raise ModelError(f"{label}: negative feature id {features[i]}")
        forest.add(features[i], float(splits[i]), 0)
    for j in range(n_leaves):
        forest.add(0, 0.0, LEAF, j, 1)
    forest.target = list(targets)
    forest.weight = [float(w) for w in weights.astype(np.float64)]

    def child(i: int, ids: list[int], leaf: list[int]) -> int:
        c = ids[i]
        if leaf[i]:
            if not 0 <= c < n_leaves:
                raise ModelError(f"{label}: leaf index {c} is out of range")
            return n + c
        if not 0 <= c < n:
            raise ModelError(f"{label}: node index {c} is out of range")
        return c

    for i in range(n):
        track = MISSING if missing and missing[i] == 1 else 0
        t, f = child(i, true_ids, true_leaf), child(i, false_ids, false_leaf)
        code = int(modes[i])
        if code != V5_MEMBER:
            forest.mode[i], forest.true[i], forest.false[i] = V5_MODES[code] | track, t, f
            continue
        chain = sets[i] or [float("nan")]  # an empty set holds nothing: x == NaN is never true
        forest.mode[i], forest.threshold[i], forest.true[i] = EQ | track, chain[0], t
        prev = i
        for v in chain[1:]:
            j = forest.add(features[i], v, EQ | track, t)
            forest.false[prev] = j
            prev = j
        forest.false[prev] = f
    for r in roots:
        if not 0 <= r < n:
            raise ModelError(f"{label}: tree root {r} is out of range")
        # A tree that is a single leaf: a root whose branches reference the same leaf (onnxruntime and
        # the reference evaluator then take the leaf at the root's own index).
        if true_ids[r] == false_ids[r] and true_leaf[r] and false_leaf[r]:
            if not 0 <= r < n_leaves:
                raise ModelError(f"{label}: leaf index {r} is out of range")
            forest.roots.append(n + r)
        else:
            forest.roots.append(r)
    forest.check_acyclic(label)
    return forest


@dataclass
class Scoring:
    """How leaf weights become outputs."""
    kind: str                 # "regressor" or "classifier"
    targets: int              # targets or classes
    aggregate: str = "SUM"
    transform: int = _ml.NONE
    base: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    binary_case: bool = False
    all_positive: bool = True


def check_features(ctx, forest: Forest, features) -> None:
    used = forest.branch_features()
    if used and isinstance(features, int) and max(used) >= features:
        raise ctx.fail(f"the trees read feature {max(used)}, X has {features}")


def threshold_type(x: dt.DType) -> str:
    return "double" if x is dt.DOUBLE else "float"


def lower(node: Node, k: KernelContext, forest: Forest, scoring: Scoring) -> Kernel:
    """The c/tree_ensemble.c.j2 kernel: X [N, C] -> Y [N, targets] (regressors) or Y labels, Z scores."""
    x = k.input(0)
    tt = threshold_type(x.dtype)
    n_rows, c = x.dims
    used = forest.branch_features()
    branch_modes = {m & ~MISSING for m in forest.branch_modes()}
    idx = "int64_t" if max(len(forest.mode), len(forest.weight)) > 2**31 - 1 else "int32_t"
    feature = [f if m != LEAF else 0 for f, m in zip(forest.feature, forest.mode)]  # leaves read nothing
    nan_possible = x.dtype.is_float
    targets = scoring.targets
    multi = targets > 1
    if multi:
        bad = [t for t in forest.target if not 0 <= t < targets]
        if bad:
            raise ModelError(f"{node.label}: target or class id {bad[0]} is out of range [0, {targets})")
    outs = k.outputs
    data = {
        "x_load": x.load("row + feature[i]"), "xt": x.compute, "tt": tt,
        "N": cexpr.lit(n_rows), "C": cexpr.lit(c),
        "max_feature": max(used) if used else -1,
        "check_features": bool(used) and not isinstance(c, int),
        "err_features": c_string(f"{node.op_type}: X has fewer features than the trees read"),
        "idx": idx,
        "feature": [str(v) for v in feature],
        "feature_type": "int64_t" if max(feature, default=0) > 2**31 - 1 else "int32_t",
        "threshold": _floats(forest.threshold, tt),
        "mode": [str(v) for v in forest.mode],
        "next_true": [str(v) for v in forest.true],
        "next_false": [str(v) for v in forest.false],
        "roots": [str(v) for v in forest.roots],
        "target": [str(v) for v in forest.target] if multi else [],
        "weight": _floats(forest.weight, tt),
        "same_mode": C_OPS[next(iter(branch_modes))] if len(branch_modes) == 1 else None,
        "missing": nan_possible and any(m & MISSING for m in forest.branch_modes()),
        "ops": C_OPS,
        "kind": scoring.kind, "targets": targets, "multi": multi, "aggregate": scoring.aggregate,
        "transform": scoring.transform, "n_trees": len(forest.roots),
        "base": _floats(scoring.base, tt) if _base_used(scoring) else [],
        "base_count": len(scoring.base),
        "labels": [c_literal(v, outs[0].dtype) for v in scoring.labels]
        if _labels_used(scoring) or outs[0].dtype is dt.STRING else [],
        "label_ctype": outs[0].dtype.c_type,
        "binary_case": scoring.binary_case, "all_positive": scoring.all_positive,
        "Y": outs[0].name, "Z": outs[1].name if len(outs) > 1 else None,
        "y_store": outs[0].store("{}"),
    }
    kernel = k.kernel("c/tree_ensemble.c.j2", helpers=(_ml.HELPER,), **data)
    size = 8 if tt == "double" else 4
    kernel.scratch = {"score": size * targets, "has": targets, "z": 4 * max(targets, 2)}
    return kernel


def _floats(values, tt: str) -> list[str]:
    """C literals of a table in the threshold type (values rounded to it first)."""
    dtype = dt.DOUBLE if tt == "double" else dt.FLOAT
    with np.errstate(over="ignore"):
        return c_literals(np.asarray(values, dtype=np.float64).astype(dtype.np), dtype)


def _base_used(s: Scoring) -> bool:
    """Whether the finishing code reads base values (the template emits the table only then)."""
    n = len(s.base)
    if s.kind == "regressor":
        return n == 1 if s.targets == 1 else n == s.targets
    if s.targets == 1:
        return n == 1
    return n > 0 if s.targets > 2 else n in (1, 2)


def _labels_used(s: Scoring) -> bool:
    return s.kind == "classifier" and (s.targets > 2 or (s.targets == 2 and s.binary_case))
