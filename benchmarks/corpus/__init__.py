"""The real-world benchmark corpus, `onnxc bench --corpus`: the models (registry.py), where their
files come from (wheels.py, exports.py, quantized.py), their inputs (feeds.py) and the run
(run.py, measure.py, report.py, cli.py). benchmarks/README.md describes it."""
