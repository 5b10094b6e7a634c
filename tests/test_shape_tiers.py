"""Builds for the input shapes a model with symbolic dims runs at (runtime/specialise.py,
ShapeTiers; session.onnxc.specialise_shapes), compared with onnxruntime at every step."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxc
from onnxc.runtime import specialise
from onnxc.runtime.loader import CompiledModel
from helpers import make_model, run_ort

RNG = np.random.default_rng(11)


def conv_net(dims=("N", 3, "H", "W")):
    """Conv 3x3 + Relu, MaxPool, Conv 3x3 stride 2, GlobalAveragePool over an input of ``dims``."""
    w1 = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    w2 = RNG.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2
    return make_model(
        [helper.make_node("Conv", ["X", "W1"], ["C"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["C"], ["R"]),
         helper.make_node("MaxPool", ["R"], ["P"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Conv", ["P", "W2"], ["D"], pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["D"], ["Y"]), helper.make_node("Identity", ["D"], ["Z"])],
        [("X", TP.FLOAT, list(dims))], [("Y", TP.FLOAT, [None] * 4), ("Z", TP.FLOAT, [None] * 4)],
        initializers=[helper.make_tensor("W1", TP.FLOAT, w1.shape, w1.ravel()),
                      helper.make_tensor("W2", TP.FLOAT, w2.shape, w2.ravel())], opset=17)


def session(model, mode: str | None = None, threads: int = 1):
    so = onnxc.SessionOptions()
    so.intra_op_num_threads = threads
    if mode is not None:
        so.add_session_config_entry("session.onnxc.specialise_shapes", mode)
    return onnxc.InferenceSession(model.SerializeToString(), so)


def check(sess, model, shape):
    feed = {"X": RNG.standard_normal(shape).astype(np.float32)}
    for got, want in zip(sess.run(None, feed), run_ort(model, feed)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_shape_run_twice_is_built_for_and_every_shape_still_runs(threads):
    model = conv_net()
    sess = session(model, "sync", threads)
    tiers = sess._model
    assert isinstance(tiers, specialise.ShapeTiers)
    check(sess, model, [1, 3, 20, 24])
    assert tiers.specialisations == 0          # a shape met once is not built for
    check(sess, model, [1, 3, 20, 24])         # the second run builds it (sync), then runs it
    assert tiers.specialisations == 1
    built = tiers._ready[((1, 3, 20, 24),)]
    assert built is not tiers.generic and all(isinstance(d, int) for d in built.inputs[0]["shape"])
    check(sess, model, [1, 3, 20, 24])
    check(sess, model, [2, 3, 9, 13])          # another shape: the generic build
    assert tiers.specialisations == 1


def test_the_default_is_background_and_the_environment_may_set_it(monkeypatch):
    monkeypatch.delenv("ONNXC_SPECIALISE_SHAPES", raising=False)
    assert session(conv_net())._model._mode == "background"
    monkeypatch.setenv("ONNXC_SPECIALISE_SHAPES", "off")
    assert isinstance(session(conv_net())._model, CompiledModel)
    assert session(conv_net(), "sync")._model._mode == "sync"   # the session's entry wins
    monkeypatch.setenv("ONNXC_SPECIALISE_SHAPES", "never")
    with pytest.raises(onnxc.InvalidArgument, match="ONNXC_SPECIALISE_SHAPES"):
        session(conv_net())


def test_background_builds_while_the_generic_build_serves():
    model = conv_net()
    sess = session(model, "background")
    tiers = sess._model
    for _ in range(specialise.SHAPES_AFTER):
        check(sess, model, [1, 3, 16, 16])
    assert tiers.wait(120)
    assert tiers.specialisations == 1
    check(sess, model, [1, 3, 16, 16])
    # a later session finds the build in the cache and runs it from its first run
    again = session(model, "background")
    check(again, model, [1, 3, 16, 16])
    assert again._model.specialisations == 1


def test_off_and_bad_values():
    assert isinstance(session(conv_net(), "off")._model, CompiledModel)
    with pytest.raises(onnxc.InvalidArgument, match="specialise_shapes"):
        session(conv_net(), "always")


def test_a_free_batch_alone_is_built_for_too_with_its_intermediates_in_one_arena():
    """The generic build of a model whose batch alone is free leaves its intermediates to the
    allocator (a slot allocated at run time for each); the build for the batch it runs at
    plans them in its arena."""
    def allocates(model) -> bool:
        with open(os.path.join(model.folder, "model.c"), encoding="utf-8") as f:
            return "onnxc_slot_alloc(ctx, &heap[" in f.read()

    model = conv_net(("N", 3, 16, 16))
    sess = session(model, "sync")
    tiers = sess._model
    assert isinstance(tiers, specialise.ShapeTiers)
    assert allocates(tiers.generic)
    for _ in range(specialise.SHAPES_AFTER):
        check(sess, model, [2, 3, 16, 16])
    built = tiers._ready[((2, 3, 16, 16),)]
    assert not allocates(built) and all(isinstance(d, int) for d in built.inputs[0]["shape"])
    check(sess, model, [2, 3, 16, 16])
    check(sess, model, [3, 3, 16, 16])     # another batch: the generic build


def test_a_session_builds_for_at_most_a_few_shapes(monkeypatch):
    monkeypatch.setattr(specialise, "SHAPES_LIMIT", 1)
    model = conv_net()
    sess = session(model, "sync")
    for shape in ([1, 3, 8, 8], [1, 3, 12, 8]):
        for _ in range(specialise.SHAPES_AFTER):
            check(sess, model, shape)
    assert sess._model.specialisations == 1


def test_a_failed_build_leaves_the_shape_on_the_generic_build(caplog):
    model = conv_net()
    sess = session(model, "sync")
    tiers = sess._model

    def fail(signature):
        raise onnxc.CompileError("no compiler today")
    tiers._build = fail
    with caplog.at_level(logging.WARNING):
        for _ in range(specialise.SHAPES_AFTER + 1):
            check(sess, model, [1, 3, 10, 10])
    assert tiers.specialisations == 0
    assert "no compiler today" in caplog.text
