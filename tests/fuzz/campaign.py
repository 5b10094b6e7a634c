"""The fuzzing campaign: sharded, resumable, recorded; its corpus replayed by CI.

    python tests/fuzz/campaign.py --shard 0/4 --seconds 3600

Mutant number m is a seed model and one to three mutations drawn from
``random.Random(f"mutant {m}")``. Shard I of N tries m = I, I + N, I + 2N, ..., so shards
never try the same mutant and may run at once, on one machine or several. Each run appends
what it did to ``campaign.json`` (date, onnxc commit, seeds, the mutants it tried, its counts
of outcomes and its findings) and the next run of the shard starts after the last mutant its
shard tried: the recorded total grows across runs. The record fixes N; a campaign with
another N starts a new record (``--record``).

The mutants run in a child process under a memory limit; the parent watches it. A child that
dies (a crash), a mutant that takes longer than ``--hang-seconds`` (a hang) and an exception
that is not onnxc's (which the child reports and survives) are findings: the run records
them and keeps the mutant in the corpus. The corpus (``corpus/``, under 2 MB) also keeps the
first mutant of every new outcome (each class of refusal message, and per seed a mutant that
ran), up to 160 files: ``--replay`` loads and runs each of them, which ``tests/test_fuzz_corpus.py`` does in CI.
"""
from __future__ import annotations

import argparse
import datetime
import fcntl
import json
import os
import random
import re
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.mutants import coarse, mutate, random_mutations, try_input  # noqa: E402
from fuzz.seeds import SEEDS, seed_bytes  # noqa: E402

HERE = Path(__file__).resolve().parent
RECORD = HERE / "campaign.json"
CORPUS = HERE / "corpus"
CORPUS_INDEX = CORPUS / "index.json"
MAX_CORPUS_BYTES = 2 << 20
MAX_CORPUS_FILES = 160
MAX_MUTANT_BYTES = 64 << 10
# Mutants that load are compiled when the corpus is replayed: a few per seed keep CI's replay short.
MAX_LOADED_IN_CORPUS = 14
# The child's address space: a mutant that makes generated code allocate wildly gets NULL
# from malloc (a RuntimeFailure), not the machine's memory.
MEMORY_LIMIT_BYTES = 16 << 30
SAVE_EVERY_SECONDS = 60.0


def mutant(m: int, seeds: dict[str, bytes]) -> tuple[str, list[tuple], bytes]:
    """Mutant number ``m``: its seed's name, its mutations and its bytes."""
    rng = random.Random(f"mutant {m}")
    name = rng.choice(sorted(seeds))
    ops = random_mutations(rng, len(seeds))
    return name, ops, mutate(seeds[name], ops, seeds)


# --- the record and the corpus (files shared by shards that run at once) ------------------------

@contextmanager
def locked_json(path: Path, empty: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The JSON object in ``path``, held under a lock on its folder (shards that run at once
    take turns) and written back on exit by a rename (a reader sees the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else empty
        yield data
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    finally:
        os.close(folder)


def resume_point(record: dict[str, Any], shard: int, shards: int) -> int:
    tried = [run["next"] for run in record["runs"] if run["shard"] == f"{shard}/{shards}"]
    return max(tried, default=shard)


def totals(record: dict[str, Any]) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    for run in record["runs"]:
        for key, count in run["outcomes"].items():
            outcomes[key] = outcomes.get(key, 0) + count
    return {"tried": sum(run["tried"] for run in record["runs"]),
            "findings": sum(len(run["findings"]) for run in record["runs"]), "outcomes": outcomes}


def save_run(record_path: Path, run: dict[str, Any]) -> None:
    with locked_json(record_path, {"shards": None, "runs": []}) as record:
        record["runs"] = [r for r in record["runs"] if r["id"] != run["id"]] + [run]
        record["totals"] = totals(record)


def keep_in_corpus(corpus: Path, m: int, seed: str, outcome: str, data: bytes, finding: bool) -> bool:
    """Keep a finding, or the first mutant of an outcome the corpus has not seen."""
    if len(data) > MAX_MUTANT_BYTES:
        return False
    with locked_json(corpus / "index.json", {"files": {}}) as index:
        kept = index["files"].values()
        loaded = not outcome.startswith("refused")
        if not finding:
            seen = {(e["seed"], e["outcome"]) if loaded else e["outcome"] for e in kept}
            if ((seed, outcome) if loaded else outcome) in seen:
                return False
            if loaded and sum(not e["outcome"].startswith("refused") for e in kept) >= MAX_LOADED_IN_CORPUS:
                return False
        files = list(corpus.glob("*.onnx"))
        if len(files) >= MAX_CORPUS_FILES or sum(f.stat().st_size for f in files) + len(data) > MAX_CORPUS_BYTES:
            return False
        name = f"{seed}-{m}.onnx"
        (corpus / name).write_bytes(data)
        index["files"][name] = {"seed": seed, "mutant": m, "outcome": outcome}
    return True


def portable_paths(text: str) -> str:
    """A traceback's file names relative to the checkout and to site-packages, so that the
    record names no folder of the machine that ran it."""
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = text.replace(checkout + os.sep, "")
    return re.sub(r'"[^"]*/site-packages/', '"site-packages/', text)


def onnxc_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# --- the parent: one run of one shard ------------------------------------------------------------

class Run:
    def __init__(self, shard: int, shards: int, record_path: Path, corpus: Path) -> None:
        self.shard, self.shards, self.record_path, self.corpus = shard, shards, record_path, corpus
        self.seeds = seed_bytes()
        with locked_json(record_path, {"shards": shards, "runs": []}) as record:
            if record["shards"] not in (None, shards):
                raise SystemExit(f"{record_path} is a campaign of {record['shards']} shards, not {shards}")
            record["shards"] = shards
            record["totals"] = totals(record)
            first = resume_point(record, shard, shards)
        now = datetime.datetime.now(datetime.timezone.utc)
        self.entry: dict[str, Any] = {
            "id": f"{now:%Y%m%dT%H%M%S}-{shard}of{shards}-{os.getpid()}", "date": now.isoformat(timespec="seconds"),
            "commit": onnxc_commit(), "shard": f"{shard}/{shards}", "seeds": sorted(SEEDS), "first": first,
            "next": first, "tried": 0, "outcomes": {}, "findings": [], "kept_in_corpus": 0}

    def finding(self, m: int, kind: str, detail: str) -> None:
        seed, ops, data = mutant(m, self.seeds)
        self.entry["findings"].append({"mutant": m, "seed": seed, "kind": kind, "mutations": repr(ops),
                                       "detail": portable_paths(detail)[-2000:]})
        self.entry["kept_in_corpus"] += keep_in_corpus(self.corpus, m, seed, kind, data, finding=True)
        print(f"finding: {kind} on mutant {m} ({seed}, {ops!r})\n{detail[-2000:]}", flush=True)

    def done(self, m: int, outcome: str) -> None:
        self.entry["tried"] += 1
        self.entry["next"] = m + self.shards
        key = coarse(outcome)
        self.entry["outcomes"][key] = self.entry["outcomes"].get(key, 0) + 1
        seed, _, data = mutant(m, self.seeds)
        self.entry["kept_in_corpus"] += keep_in_corpus(self.corpus, m, seed, outcome, data, finding=False)

    def save(self) -> None:
        save_run(self.record_path, self.entry)

    def campaign(self, seconds: float, hang_seconds: float, workdir: Path) -> dict[str, Any]:
        deadline = time.time() + seconds
        try:
            while time.time() < deadline:
                self.child(deadline, hang_seconds, workdir)
        except KeyboardInterrupt:
            print("interrupted: the run is recorded up to its last outcome", flush=True)
        finally:
            self.save()
        return self.entry

    def child(self, deadline: float, hang_seconds: float, workdir: Path) -> None:
        """One child from the resume point until the deadline, a crash or a hang."""
        log, errors = workdir / "log.jsonl", workdir / "stderr.txt"
        log.write_text("")
        with open(errors, "w") as stderr:
            proc = subprocess.Popen([sys.executable, __file__, "--worker", "--shard", f"{self.shard}/{self.shards}",
                                     "--start", str(self.entry["next"]), "--until", str(deadline), "--log", str(log)],
                                    stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        try:
            self.watch(proc, log, errors, hang_seconds)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()

    def watch(self, proc: subprocess.Popen, log: Path, errors: Path, hang_seconds: float) -> None:
        started: dict[int, float] = {}
        read, saved = 0, time.monotonic()
        while True:
            exited = proc.poll() is not None
            with open(log) as f:
                f.seek(read)
                lines = f.readlines()
            complete = [line for line in lines if line.endswith("\n")]
            read += sum(len(line.encode()) for line in complete)
            for event in map(json.loads, complete):
                if "start" in event:
                    started = {event["start"]: time.monotonic()}
                elif "foreign" in event:
                    self.finding(event["foreign"], "foreign exception", event["error"])
                    self.done(event["foreign"], "foreign exception")
                    started = {}
                else:
                    self.done(event["done"], event["outcome"])
                    started = {}
            if time.monotonic() - saved > SAVE_EVERY_SECONDS:
                self.save()
                saved = time.monotonic()
            running = next(iter(started.items()), None)
            if exited:
                if running is not None:
                    self.finding(running[0], "crash", f"exit status {proc.returncode}\n{errors.read_text()}")
                    self.done(running[0], "crash")
                return
            if running is not None and time.monotonic() - running[1] > hang_seconds:
                os.killpg(proc.pid, 9)
                proc.wait()
                self.finding(running[0], "hang", f"no outcome after {hang_seconds:.0f} s")
                self.done(running[0], "hang")
                return
            time.sleep(0.5)


# --- the child -----------------------------------------------------------------------------------

def quiet_and_limited() -> None:
    import logging
    import resource
    import warnings
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    warnings.simplefilter("ignore")
    logging.getLogger("onnxc").setLevel(logging.CRITICAL)


def worker(shard: int, shards: int, start: int, until: float, log: Path) -> None:
    quiet_and_limited()
    seeds = seed_bytes()
    m = start
    with open(log, "a", buffering=1) as out:
        while time.time() < until:
            _, _, data = mutant(m, seeds)
            out.write(json.dumps({"start": m}) + "\n")
            try:
                outcome = try_input(data)
            except Exception:
                out.write(json.dumps({"foreign": m, "error": traceback.format_exc()}) + "\n")
            else:
                out.write(json.dumps({"done": m, "outcome": outcome}) + "\n")
            m += shards


def replay(corpus: Path) -> int:
    """Load and run every mutant of the corpus; the number of those that ended as a foreign exception."""
    quiet_and_limited()
    failed = 0
    for path in sorted(corpus.glob("*.onnx")):
        print(f"{path.name}: ", end="", flush=True)
        try:
            print(try_input(path.read_bytes()), flush=True)
        except Exception:
            failed += 1
            print(f"FOREIGN EXCEPTION\n{traceback.format_exc()}", flush=True)
    print(f"REPLAYED {len(list(corpus.glob('*.onnx')))} FAILED {failed}")
    return failed


def parse_shard(text: str) -> tuple[int, int]:
    shard, _, shards = text.partition("/")
    if not (shard.isdigit() and shards.isdigit() and int(shard) < int(shards)):
        raise argparse.ArgumentTypeError(f"a shard is I/N with 0 <= I < N, not {text!r}")
    return int(shard), int(shards)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shard", type=parse_shard, default=(0, 1), help="I/N: this shard of N (default 0/1)")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long this run lasts")
    parser.add_argument("--hang-seconds", type=float, default=600.0, help="a mutant longer than this is a hang")
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--replay", action="store_true", help="load and run every mutant of the corpus")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay:
        sys.exit(1 if replay(args.corpus) else 0)
    if args.worker:
        worker(*args.shard, args.start, args.until, args.log)
        return
    import tempfile
    with tempfile.TemporaryDirectory(prefix="onnxc-fuzz-") as workdir:
        run = Run(*args.shard, args.record, args.corpus)
        entry = run.campaign(args.seconds, args.hang_seconds, Path(workdir))
    print(json.dumps({k: entry[k] for k in ("shard", "first", "next", "tried", "outcomes")}, indent=1))
    print(f"findings: {len(entry['findings'])}, kept in the corpus: {entry['kept_in_corpus']}")


if __name__ == "__main__":
    main()
