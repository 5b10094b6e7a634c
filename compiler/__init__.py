"""Compiler: frontend (ONNX -> IR), the typed IR, op definitions and passes."""
