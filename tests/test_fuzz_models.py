"""Fuzzing: mutated bytes of small real models never crash, hang or escape onnxc's exceptions.

Each input is one of the seed models of ``fuzz/seeds.py`` (a CNN, an MLP, If and Loop,
com.microsoft contrib ops, an If whose branches differ in rank, seeded random ops, QLinear
ops), its serialized bytes mutated by hypothesis as ``fuzz/mutants.py`` describes.
``onnxc.InferenceSession`` must then load the model or raise an OnnxcError; a loaded model
runs once on zeros and may raise RuntimeFailure or InvalidArgument.

The campaign runs in a child process (this file run as a script), so a crash of the compiled
code fails the test instead of the test run; before each input the child writes it to
``current.bin``, which the test keeps and prints when the child dies or hangs. CI's campaign
lasts 40 seconds; `python -m pytest -m fuzz tests/test_fuzz_models.py` adds one of
ONNXC_FUZZ_SECONDS seconds (default 1,200). The sharded, recorded campaign and its corpus are
``fuzz/campaign.py``'s.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fuzz.campaign import quiet_and_limited
from fuzz.mutants import coarse, mutate, mutate_field, try_input
from fuzz.seeds import seed_bytes

DEFAULT_SECONDS = 40.0
LONG_SECONDS = 1200.0


# --- the campaign (in the child process) ---------------------------------------------------------

def campaign(seconds: float, out: Path) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    seeds = seed_bytes()
    stats: dict[str, int] = {"tried": 0}
    position = st.integers(0, 1 << 16)
    mutation = st.one_of(
        st.tuples(st.just("flip"), position, st.integers(1, 255)),
        st.tuples(st.just("truncate"), position),
        st.tuples(st.just("insert"), position, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), position, st.integers(1, 16)),
        st.tuples(st.just("splice"), st.integers(0, len(seeds) - 1), position, position, st.integers(1, 64)),
        st.tuples(st.just("field"), position, st.integers(0, 1 << 10)),
        st.tuples(st.just("field"), position, st.integers(0, 1 << 10)),   # (twice as likely: they parse)
    )
    end = time.monotonic() + seconds

    @settings(max_examples=20, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(seed=st.sampled_from(sorted(seeds)), ops=st.lists(mutation, min_size=1, max_size=3))
    def one_input(seed: str, ops: list) -> None:
        if time.monotonic() > end:
            return
        data = mutate(seeds[seed], ops, seeds)
        (out / "current.bin").write_bytes(data)
        stats["tried"] += 1
        try:
            outcome = coarse(try_input(data))
        except BaseException:
            (out / "failure.bin").write_bytes(data)
            (out / "failure.txt").write_text(f"seed {seed}, mutations {ops!r}\n{traceback.format_exc()}")
            raise
        stats[outcome] = stats.get(outcome, 0) + 1

    while time.monotonic() < end:
        one_input()
    return stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    quiet_and_limited()
    stats = campaign(args.seconds, args.out)
    print("FUZZ-STATS " + json.dumps(stats))


# --- the test ------------------------------------------------------------------------------------

@pytest.mark.fuzz
@pytest.mark.parametrize("seconds", [pytest.param(DEFAULT_SECONDS, marks=pytest.mark.ci_slice),
                                     float(os.environ.get("ONNXC_FUZZ_SECONDS", LONG_SECONDS))])
def test_mutated_models_load_or_raise_onnxc_errors(seconds, tmp_path, capsys):
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, __file__, "--seconds", str(seconds), "--out", str(tmp_path)],
                              capture_output=True, text=True, timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the campaign hung on the input kept in {tmp_path / 'current.bin'}: "
                             f"{_hex(tmp_path / 'current.bin')}") from None
    if proc.returncode != 0:
        kept = tmp_path / ("failure.bin" if (tmp_path / "failure.bin").exists() else "current.bin")
        detail = (tmp_path / "failure.txt").read_text() if (tmp_path / "failure.txt").exists() else proc.stderr[-3000:]
        raise AssertionError(f"the campaign failed (exit status {proc.returncode}) on the input kept in {kept}: "
                             f"{_hex(kept)}\n{detail}")
    stats = json.loads(proc.stdout.rsplit("FUZZ-STATS ", 1)[1])
    with capsys.disabled():
        print(f"\nfuzz: {stats['tried']} mutated models in {time.monotonic() - started:.0f} s: {stats}")
    assert stats["tried"] > 0


def _hex(path: Path) -> str:
    return path.read_bytes().hex() if path.exists() else "(none written)"


def test_mutations_change_the_model():
    # the campaign is only as good as its mutations: each kind must produce other bytes
    seeds = seed_bytes()
    data = seeds["control_flow"]
    rng = random.Random(0)
    for op in [("flip", 10, 1), ("truncate", 100), ("insert", 5, b"\xff"), ("delete", 5, 3),
               ("splice", 0, 3, 40, 20), ("field", rng.randrange(1000), 3)]:
        assert mutate(data, [op], seeds) != data, op
    changed = {mutate_field(data, which, 1) for which in range(200)}
    assert len(changed) > 50


if __name__ == "__main__":
    main()


def test_a_mutant_that_loops_for_ever_is_stopped_not_a_hang(monkeypatch):
    """Found by CI's campaign: a mutation set the control-flow seed's Loop trip count to
    737,757,407,291,113,475, so the model itself asks for a run of years (onnxruntime would run
    it as long). The harness stops a run past RUN_SECONDS with RunOptions.terminate, which
    takes effect between the Loop's iterations; only a run that does not stop then is a hang."""
    import onnx
    from onnx import numpy_helper
    from fuzz import mutants
    from fuzz.seeds import control_flow
    model = control_flow()
    for i, init in enumerate(model.graph.initializer):
        if init.name == "n":
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(
                np.array(737_757_407_291_113_475, np.int64), "n"))
    assert any(t.name == "n" for t in model.graph.initializer)
    monkeypatch.setattr(mutants, "RUN_SECONDS", 1.0)
    started = time.monotonic()
    assert try_input(model.SerializeToString()) == "run stopped after the time limit"
    assert time.monotonic() - started < 60


def test_a_mutant_that_draws_for_a_minute_in_one_node_is_stopped():
    """Found by CI's campaign: a mutation set the random-ops seed's Multinomial sample_size to
    2^31 - 1, one node drawing for about a minute. RunOptions.terminate takes effect inside the
    node (every 2^20 draws), not only after it: 2^28 samples here (an int32 output of 1 GiB,
    of which the draws until the stop touch a part; about 6 s of draws to the end), stopped
    half a second in."""
    import threading
    import onnx
    import onnxc
    from fuzz.mutants import zeros_feed
    from fuzz.seeds import seed_bytes
    model = onnx.load_from_string(seed_bytes()["random_ops"])
    multinomial = [n for n in model.graph.node if n.op_type == "Multinomial"]
    assert multinomial
    for attr in multinomial[0].attribute:
        if attr.name == "sample_size":
            attr.i = 1 << 28
    options = onnxc.SessionOptions()
    options.intra_op_num_threads = 1
    sess = onnxc.InferenceSession(model.SerializeToString(), options)
    stop = onnxc.RunOptions()
    watchdog = threading.Timer(0.5, lambda: setattr(stop, "terminate", True))
    started = time.monotonic()
    watchdog.start()
    try:
        with pytest.raises(onnxc.RuntimeFailure, match="terminated"):
            sess.run(None, zeros_feed(sess), stop)
    finally:
        watchdog.cancel()
    assert time.monotonic() - started < 2.5
