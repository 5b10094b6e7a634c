"""Real client libraries of onnxruntime, run through their own entry points.

``python clients.py RUNTIME CLIENT`` runs CLIENT (``ocr``: rapidocr-onnxruntime reading a
rendered page; ``magika``: Google's Magika naming the content type of a few files) and prints
its result as JSON. RUNTIME ``onnxc`` calls ``onnxc.install_as_onnxruntime()`` before the
library is imported, so the library's own ``import onnxruntime`` gets onnxc; ``onnxruntime``
leaves the import alone. Each run is a process of its own: a library binds onnxruntime's names
when it is imported, so the two runtimes cannot share one.
"""
from __future__ import annotations

import json
import sys
from typing import Any

# Lines of a page rendered for OCR: words, digits and punctuation at two sizes.
PAGE = [("Ahead-of-time ONNX", 1.1), ("compiled to C in 2026", 1.1), ("invoice no. 4711, total 93.50", 0.8)]

# Files whose content type Magika names (its model reads the first and last bytes).
FILES = {
    "python": b"#!/usr/bin/env python3\nimport os\n\n\ndef main():\n    print(os.getcwd())\n\n\nmain()\n" * 4,
    "html": b"<!DOCTYPE html>\n<html><head><title>t</title></head><body><p>hello</p></body></html>\n" * 4,
    "json": b'{"name": "onnxc", "version": [0, 1, 0], "ops": {"Conv": true, "Gemm": true}}\n',
    "c": b"#include <stdio.h>\n\nint main(void)\n{\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n" * 3,
    "csv": b"id,name,score\n1,ada,0.5\n2,bob,0.25\n3,cy,0.125\n4,dee,0.0625\n" * 6,
    "shell": b"#!/bin/sh\nset -e\nfor f in *.txt; do\n  wc -l \"$f\"\ndone\n" * 4,
}


def page() -> Any:
    import cv2
    import numpy as np
    img = np.full((60 * len(PAGE) + 40, 640, 3), 255, np.uint8)
    for row, (text, scale) in enumerate(PAGE):
        cv2.putText(img, text, (20, 60 + 60 * row), cv2.FONT_HERSHEY_SIMPLEX, scale, (20, 20, 20), 2, cv2.LINE_AA)
    return img


def ocr() -> list[dict[str, Any]]:
    """Detection, direction classification and recognition: each text line with its box and score."""
    from rapidocr_onnxruntime import RapidOCR
    lines, _ = RapidOCR()(page())
    return [{"box": [[float(v) for v in point] for point in box], "text": text, "score": float(score)}
            for box, text, score in lines or []]


def magika() -> dict[str, dict[str, Any]]:
    """The content type Magika names for each file, with its score."""
    from magika import Magika
    m = Magika()
    out = {}
    for name, data in FILES.items():
        result = m.identify_bytes(data)
        out[name] = {"label": str(result.output.label), "score": float(result.score)}
    return out


CLIENTS = {"ocr": ocr, "magika": magika}


def main(runtime: str, client: str) -> None:
    if runtime == "onnxc":
        import onnxc
        onnxc.install_as_onnxruntime()
    result = CLIENTS[client]()
    import onnxruntime
    print(json.dumps({"runtime": onnxruntime.__name__, "result": result}))


if __name__ == "__main__":
    main(*sys.argv[1:])
