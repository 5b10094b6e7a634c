"""``python -m onnxc.benchmarks.corpus.tiny_exports [--models NAME,...] [FOLDER]``: the small
versions of the corpus's exported networks (tiny_models.py), each through the same exporter, opset,
names and dynamic dims as its corpus model, written once as ``FOLDER/<corpus name>.onnx`` for the
tests, which load them without torch (tests/test_third_party.py). The exports run in this
process (torch, torchvision, transformers and onnxscript installed: ``pip install '.[bench]'``):
nothing is timed here.

FOLDER defaults to ``tests/third_party/models`` of the source checkout. ``models.json`` there
records how each file was made: the versions of torch, torchvision, transformers and onnxscript,
the export's spec (builder, exporter, opset, names, dynamic dims, the example's shapes) and the
file's sha256. A file over MAX_BYTES is an error: the tests' files stay small."""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import sys

from . import registry
from .export_one import export
from .exports import TorchExport

MAX_BYTES = 1 << 20
MANIFEST = "models.json"
PACKAGES = ("torch", "torchvision", "transformers", "onnxscript", "onnx")


def default_folder() -> str:
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(checkout, "tests", "third_party", "models")


def without_stack_traces(path: str) -> bytes:
    """Drops the exporter's per-node stack traces (``pkg.torch.onnx.stack_trace``: source paths
    of the machine that exported) from the file at ``path``; the file's new bytes."""
    import onnx
    model = onnx.load(path)

    def strip(nodes) -> None:
        for node in nodes:
            keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
            del node.metadata_props[:]
            node.metadata_props.extend(keep)
            for attr in node.attribute:
                strip(attr.g.node)
                for g in attr.graphs:
                    strip(g.node)
    strip(model.graph.node)
    for function in model.functions:
        strip(function.node)
    data = model.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    return data


def export_tiny(model: registry.CorpusModel, folder: str) -> dict:
    """Exports ``model``'s small version into ``folder``; its manifest entry."""
    source: TorchExport = model.source
    path = os.path.join(folder, f"{model.name}.onnx")
    export(source.spec(path, models="tiny_models"))
    with open(path + ".json", encoding="utf-8") as f:
        made = json.load(f)
    os.remove(path + ".json")
    data = without_stack_traces(path)
    if len(data) > MAX_BYTES:
        raise SystemExit(f"{model.name}: {len(data)} bytes, more than {MAX_BYTES}: make tiny_models.{made['builder']} "
                         "smaller")
    keep = ("builder", "exporter", "opset", "inputs", "outputs", "dynamic", "example_shapes", "dynamic_shapes")
    return {"library": source.arch.library, **{k: made[k] for k in keep if k in made}, "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def record(folder: str, name: str, entry: dict) -> None:
    """Writes ``entry`` into the folder's manifest, keeping the other models' entries."""
    path = os.path.join(folder, MANIFEST)
    manifest = {"made_by": "python -m onnxc.benchmarks.corpus.tiny_exports", "versions": {}, "models": {}}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    manifest["versions"] = {p: importlib.metadata.version(p) for p in PACKAGES}
    manifest["models"] = dict(sorted({**manifest["models"], name: entry}.items()))
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(path + ".part", path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnxc.benchmarks.corpus.tiny_exports", description=__doc__)
    parser.add_argument("folder", nargs="?", default=default_folder())
    parser.add_argument("--models", default="", help="corpus names to export (default: all of them)")
    args = parser.parse_args(argv)
    chosen = [m for m in registry.select([n for n in args.models.split(",") if n]) if m in registry.EXPORTED]
    os.makedirs(args.folder, exist_ok=True)
    for model in chosen:
        print(f"{model.name} ...", end=" ", flush=True)
        entry = export_tiny(model, args.folder)
        record(args.folder, model.name, entry)
        print(f"{entry['bytes']} bytes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
