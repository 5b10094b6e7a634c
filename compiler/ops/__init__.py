"""ONNX operators, one module each. Importing :mod:`registry` loads them all on first lookup."""
