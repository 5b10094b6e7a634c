"""Jinja templates of generated code: ``c/`` for the C backend."""
