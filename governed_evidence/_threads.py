"""One BLAS thread for the commands, unless the operator says otherwise; imported first by the CLI.

Search multiplies one query vector by a few thousand to a few hundred thousand stored rows:
products that take well under a millisecond on one core, where OpenBLAS's thread pool gains
nothing and, when the cores are busy (other callers, the query embedder, a copy loading),
costs several times the product itself (docs/performance.md, "One BLAS thread in the
commands"). OpenBLAS reads its thread count once, when numpy loads, so this must run before
anything imports numpy: the CLI imports it ahead of its other imports
(tests/test_blas_threads.py checks a fresh process).
An operator's own ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS``) is kept.
"""

from __future__ import annotations

import os

__all__: list[str] = []

if "OPENBLAS_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
