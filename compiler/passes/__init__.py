"""Graph passes, each a named function ``pass(graph) -> None``; see :mod:`.pipeline`."""
