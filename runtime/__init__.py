"""Runtime: the onnxruntime-style session API, the artifact loader and the compile cache."""
