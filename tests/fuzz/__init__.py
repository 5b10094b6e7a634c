"""The model fuzzer: seed models, mutations, the sharded campaign and its corpus."""
