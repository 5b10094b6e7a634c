"""``python -m onnxc.benchmarks`` (or ``python -m benchmarks`` from the repository root)."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
