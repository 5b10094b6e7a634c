"""Code generation: IR -> C (and CUDA) source through Jinja templates."""
