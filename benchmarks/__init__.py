"""onnxc's benchmark suite: onnxc against onnxruntime on a model suite and a GEMM
microbenchmark (``python -m onnxc.benchmarks``; ``cli.main`` is the entry point).

Nothing is imported here: the memory and BLAS child processes run modules of this
package and must not load more than they measure."""
