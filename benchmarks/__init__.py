"""Performance harness (``make bench`` / ``make bench-quick``); not part of the unit tests.

Run from the repository root: ``python -m benchmarks.run --help``.
"""
