"""Client libraries written for onnxruntime, run on onnxc with only the import swapped.

Each library (a pinned test dependency) runs its own entry point twice, in processes of their
own (third_party/clients.py): once on onnxruntime, once after ``onnxc.install_as_onnxruntime()``.
The results must be the same: the same text lines and boxes, the same content types, scores
within 1e-4. Cost: the OCR pipeline compiles three PaddleOCR models on first use, two minutes
of CPU time (6 minutes of wall time on a 2-core machine under a load of 10); Magika's model
about ten seconds.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from tools import missing

CLIENTS = os.path.join(os.path.dirname(__file__), "third_party", "clients.py")
SCORE_TOLERANCE = 1e-4

# The client, and the distributions it needs at the versions pinned in the test extra.
PINS = {"ocr": {"rapidocr-onnxruntime": "1.4.4", "onnxruntime": "1.32.0"},
        "magika": {"magika": "1.0.3", "onnxruntime": "1.32.0"}}


def run_client(runtime: str, client: str) -> Any:
    for project, version in PINS[client].items():
        try:
            found = importlib.metadata.version(project)
        except importlib.metadata.PackageNotFoundError:
            missing(f"needs {project}=={version} (the test extra)")
        if found != version:
            missing(f"needs {project}=={version} (the test extra), found {found}")
    proc = subprocess.run([sys.executable, CLIENTS, runtime, client], capture_output=True, text=True,
                          timeout=1200, env=os.environ.copy())
    assert proc.returncode == 0, f"{client} on {runtime}:\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["runtime"] == runtime      # the library really ran on the runtime named
    return report["result"]


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="rapidocr-onnxruntime 1.4.4 installs on Python < 3.13")
def test_rapidocr_reads_the_same_text_on_onnxc():
    expected = run_client("onnxruntime", "ocr")
    actual = run_client("onnxc", "ocr")
    assert len(expected) == 3, f"onnxruntime's reading of the test page: {expected}"
    assert [line["text"] for line in actual] == [line["text"] for line in expected]
    for got, want in zip(actual, expected):
        np.testing.assert_allclose(got["box"], want["box"], atol=1.0, err_msg=want["text"])   # within a pixel
        assert got["score"] == pytest.approx(want["score"], abs=SCORE_TOLERANCE), want["text"]


def test_magika_names_the_same_content_types_on_onnxc():
    expected = run_client("onnxruntime", "magika")
    actual = run_client("onnxc", "magika")
    assert {name: r["label"] for name, r in actual.items()} == {name: r["label"] for name, r in expected.items()}
    assert expected["python"]["label"] == "python" and expected["c"]["label"] == "c"
    for name, want in expected.items():
        assert actual[name]["score"] == pytest.approx(want["score"], abs=SCORE_TOLERANCE), name


def test_install_as_onnxruntime_maps_the_capi_modules_too():
    code = ("import onnxc; onnxc.install_as_onnxruntime()\n"
            "import onnxruntime\n"
            "from onnxruntime.capi.onnxruntime_pybind11_state import NoSuchFile\n"
            "assert onnxruntime is onnxc, onnxruntime\n"
            "try:\n"
            "    onnxruntime.InferenceSession('no-such-model.onnx')\n"
            "except NoSuchFile:\n"
            "    print('caught')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "caught"
