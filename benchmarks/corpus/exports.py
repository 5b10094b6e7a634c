"""Models exported here with ``torch.onnx.export`` from torchvision and transformers, with
random weights (seeded; transformers models are built from configs, nothing is downloaded).

This module does not import torch: an export runs in a child process
(``python -m onnxc.benchmarks.corpus.export_one``), so torch's own thread pool never shares
the timing process, and the corpus definitions load where torch is not installed. The file
goes to the corpus cache under a folder named after the versions that made it (torch,
torchvision or transformers, onnxscript for dynamo), so an upgrade exports anew; a JSON file
beside it records how it was made."""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import subprocess
import sys

from .wheels import SourceUnavailable

EXPORT_TIMEOUT_S = 1800

TORCHSCRIPT_OPSET = 17
DYNAMO_OPSET = 18

TINY_VOCAB = 1000   # token ids of the small versions (tiny_models.py) the tests run


@dataclasses.dataclass(frozen=True)
class Architecture:
    """A network to export: ``builder`` names a function of ``torch_models`` that returns the
    module and example inputs; input and output names and the dims that stay dynamic
    (TorchScript's ``dynamic_axes``; dynamo gets the same as ``dynamic_shapes``)."""
    builder: str
    library: str                                  # torchvision or transformers: part of the cache key
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dynamic: tuple[tuple[str, int, str], ...] = ()  # (value name, axis, dim name)

    def dynamic_axes(self) -> dict[str, dict[int, str]]:
        axes: dict[str, dict[int, str]] = {}
        for name, axis, dim in self.dynamic:
            axes.setdefault(name, {})[axis] = dim
        return axes


@dataclasses.dataclass(frozen=True)
class TorchExport:
    """One architecture through one exporter: ``torchscript`` (opset 17) or ``dynamo`` (opset 18)."""
    arch: Architecture
    exporter: str

    @property
    def opset(self) -> int:
        return TORCHSCRIPT_OPSET if self.exporter == "torchscript" else DYNAMO_OPSET

    def versions(self) -> dict[str, str]:
        packages = ["torch", self.arch.library] + (["onnxscript"] if self.exporter == "dynamo" else [])
        found = {}
        for package in packages:
            try:
                found[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                raise SourceUnavailable(f"{package} is not installed (pip install 'onnxc[bench]')") from None
        return found

    def describe(self) -> str:
        return f"{self.arch.library} {self.arch.builder}, {self.exporter} exporter, opset {self.opset}"

    def path(self, cache: str) -> str:
        key = "_".join(f"{p}-{v}" for p, v in self.versions().items())
        return os.path.join(cache, "exports", key, f"{self.arch.builder}.{self.exporter}.onnx")

    def spec(self, path: str, models: str = "torch_models") -> dict:
        """What export_one reads: the builder (a function of the module ``models``), the exporter,
        names, dynamic dims and where the file goes."""
        return {"builder": self.arch.builder, "models": models, "exporter": self.exporter, "opset": self.opset,
                "inputs": self.arch.inputs, "outputs": self.arch.outputs, "dynamic": self.arch.dynamic,
                "path": path}

    def fetch(self, cache: str, rebuild: bool = False) -> str:
        path = self.path(cache)
        failure = path + ".failed"
        if not rebuild and os.path.exists(path):
            return path
        if not rebuild and os.path.exists(failure):   # export failures are remembered: --rebuild tries again
            with open(failure, encoding="utf-8") as f:
                raise SourceUnavailable(f"export failed (cached): {f.read().strip()}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            export_in_child(self.spec(path))
        except SourceUnavailable as e:
            with open(failure, "w", encoding="utf-8") as f:
                f.write(str(e).removeprefix("export failed: ") + "\n")
            raise
        if os.path.exists(failure):
            os.remove(failure)
        return path


def export_in_child(spec: dict) -> None:
    """One export (``spec`` as TorchExport.spec makes it) in a child process; the file, and a JSON
    file beside it saying how it was made, are at ``spec["path"]`` afterwards."""
    cmd = [sys.executable, "-m", f"{__package__}.export_one", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise SourceUnavailable("export failed: timed out") from None
    if proc.returncode != 0 or not os.path.exists(spec["path"]):
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln]
        raise SourceUnavailable(f"export failed: {lines[-1] if lines else f'exit status {proc.returncode}'}")


def _image(builder: str) -> Architecture:
    """A torchvision network on one image (or clip): dynamic batch."""
    return Architecture(builder, "torchvision", ("input",), ("output",),
                        (("input", 0, "batch"), ("output", 0, "batch")))


def _text(builder: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> Architecture:
    """A transformers network on token ids: dynamic batch and sequence."""
    dims = tuple((name, axis, dim) for name in inputs + outputs for axis, dim in ((0, "batch"), (1, "sequence")))
    return Architecture(builder, "transformers", inputs, outputs, dims)


MOBILENET_V3 = _image("mobilenet_v3_large")
EFFICIENTNET_B0 = _image("efficientnet_b0")
REGNET_Y_800MF = _image("regnet_y_800mf")
CONVNEXT_T = _image("convnext_tiny")
VIT_B_16 = _image("vit_b_16")
SWIN_T = _image("swin_t")
DEEPLABV3_MOBILENET = Architecture("deeplabv3_mobilenet_v3_large", "torchvision", ("input",), ("out",),
                                   (("input", 0, "batch"), ("out", 0, "batch")))
R2PLUS1D_18 = _image("r2plus1d_18")

BERT_BASE = _text("bert_base", ("input_ids", "attention_mask"), ("last_hidden_state",))
GPT2 = _text("gpt2", ("input_ids", "attention_mask"), ("logits",))
LLAMA_GQA = _text("llama_gqa", ("input_ids", "attention_mask"), ("logits",))
T5_ENCODER = _text("t5_encoder", ("input_ids", "attention_mask"), ("last_hidden_state",))
WHISPER_TINY_ENCODER = Architecture("whisper_tiny_encoder", "transformers", ("input_features",),
                                    ("last_hidden_state",), (("input_features", 0, "batch"),
                                                             ("last_hidden_state", 0, "batch")))
WAV2VEC2_BASE = Architecture("wav2vec2_base", "transformers", ("input_values",), ("last_hidden_state",),
                             (("input_values", 0, "batch"), ("input_values", 1, "samples"),
                              ("last_hidden_state", 0, "batch"), ("last_hidden_state", 1, "frames")))

# The Llama-style decoder as it generates: one new token, the caches of the tokens before it in,
# the caches with it out. Names as onnxruntime-genai and optimum write them.
KV_LAYERS = 4
KV_HEADS = 4
HEAD_DIM = 64
_past = tuple(f"past_key_values.{i}.{kind}" for i in range(KV_LAYERS) for kind in ("key", "value"))
_present = tuple(f"present.{i}.{kind}" for i in range(KV_LAYERS) for kind in ("key", "value"))
LLAMA_GQA_KV = Architecture(
    "llama_gqa_kv", "transformers", ("input_ids", "attention_mask", "position_ids") + _past, ("logits",) + _present,
    (("input_ids", 0, "batch"), ("attention_mask", 0, "batch"), ("attention_mask", 1, "total_sequence"),
     ("position_ids", 0, "batch"))
    + tuple((name, axis, dim) for name in _past for axis, dim in ((0, "batch"), (2, "past_sequence")))
    + tuple((name, axis, dim) for name in _present for axis, dim in ((0, "batch"), (2, "total_sequence"))))
