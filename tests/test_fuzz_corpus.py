"""The fuzzing campaign's corpus replayed, its record kept honestly, its shards disjoint and resumable.

``fuzz/corpus/`` holds the mutants of ``fuzz/campaign.py`` with a new outcome and every
finding; each must still load and run or be refused with an onnxc exception, in a child
process so that a crash fails the test instead of the test run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fuzz import campaign
from fuzz.mutants import mutate, outcome_class
from fuzz.seeds import seed_bytes

REPLAY_TIMEOUT_SECONDS = 300


def test_corpus_mutants_load_and_run_or_are_refused(tmp_path):
    files = sorted(campaign.CORPUS.glob("*.onnx"))
    assert files, "the corpus is empty"
    try:
        proc = subprocess.run([sys.executable, campaign.__file__, "--replay"], capture_output=True, text=True,
                              timeout=REPLAY_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the replay hung after:\n{e.stdout}") from None
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    assert f"REPLAYED {len(files)} FAILED 0" in proc.stdout


def test_corpus_is_indexed_and_small():
    index = json.loads(campaign.CORPUS_INDEX.read_text())["files"]
    assert set(index) == {p.name for p in campaign.CORPUS.glob("*.onnx")}
    assert sum(p.stat().st_size for p in campaign.CORPUS.glob("*.onnx")) <= campaign.MAX_CORPUS_BYTES
    seeds = seed_bytes()
    for name, entry in index.items():
        # each file is the mutant its index names: the corpus can be regrown from the numbers
        assert campaign.mutant(entry["mutant"], seeds)[2] == (campaign.CORPUS / name).read_bytes(), name


def test_recorded_totals_are_the_sum_of_the_runs():
    record = json.loads(campaign.RECORD.read_text())
    assert record["totals"] == campaign.totals(record)
    for run in record["runs"]:
        shard, shards = map(int, run["shard"].split("/"))
        assert shards == record["shards"]
        assert run["tried"] == sum(run["outcomes"].values())
        assert (run["next"] - run["first"]) == run["tried"] * shards
        assert run["first"] % shards == shard


def test_shards_are_disjoint_and_resume(tmp_path):
    record, corpus = tmp_path / "campaign.json", tmp_path / "corpus"
    first = campaign.Run(1, 3, record, corpus)
    assert first.entry["first"] == 1
    for m in (1, 4, 7):
        first.done(m, "refused: ModelParseError: bad bytes")
    first.save()
    assert campaign.Run(1, 3, record, corpus).entry["first"] == 10
    assert campaign.Run(2, 3, record, corpus).entry["first"] == 2
    try:
        campaign.Run(0, 4, record, corpus)
    except SystemExit as e:
        assert "3 shards" in str(e)
    else:
        raise AssertionError("a record of 3 shards took a run of shard 0/4")
    saved = json.loads(record.read_text())
    assert saved["totals"]["tried"] == 3 and saved["runs"][0]["next"] == 10


def test_mutants_are_reproducible_and_differ():
    seeds = seed_bytes()
    assert campaign.mutant(12345, seeds) == campaign.mutant(12345, seeds)
    assert len({campaign.mutant(m, seeds)[2] for m in range(50)}) > 40
    assert {campaign.mutant(m, seeds)[0] for m in range(200)} == set(seeds)


def test_a_field_mutation_of_a_string_that_is_not_utf8_leaves_the_bytes_as_they_were():
    """A flipped byte can leave a repeated string field that protobuf will not decode: the
    mutator skips that field's change rather than fail the campaign (a falsifying example of
    the model campaign)."""
    seeds = seed_bytes()
    flipped = mutate(seeds["mlp"], [("flip", 9, 195)], seeds)
    assert mutate(flipped, [("field", 2115, 254)], seeds) == flipped
    assert mutate(seeds["mlp"], [("flip", 9, 195), ("field", 2115, 254), ("insert", 8340, b"\x95\x99\xcf(\xae\x02")],
                  seeds)


def test_corpus_keeps_new_outcomes_and_findings(tmp_path):
    seeds = seed_bytes()
    refused = outcome_class("refused", ValueError("initializer 'w1' has 12 values, not 3"))
    assert refused == "refused: ValueError: initializer '_' has N values, not N"
    data = campaign.mutant(0, seeds)[2]
    assert campaign.keep_in_corpus(tmp_path, 0, "mlp", refused, data, finding=False)
    assert not campaign.keep_in_corpus(tmp_path, 1, "mlp", refused, data, finding=False)
    assert campaign.keep_in_corpus(tmp_path, 2, "mlp", "ran", data, finding=False)
    assert campaign.keep_in_corpus(tmp_path, 3, "quantized", "ran", data, finding=False)
    assert campaign.keep_in_corpus(tmp_path, 4, "mlp", "crash", data, finding=True)
    assert sorted(p.name for p in Path(tmp_path).glob("*.onnx")) == ["mlp-0.onnx", "mlp-2.onnx", "mlp-4.onnx",
                                                                       "quantized-3.onnx"]
