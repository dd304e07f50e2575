"""The commands run numpy's BLAS on one thread unless the operator sets its threads.

Asked of OpenBLAS itself, in a fresh process (its thread count is fixed when numpy loads). Skips
where numpy is built against another BLAS (the wheel on Linux bundles scipy-openblas).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

_LIB = glob.glob(str(Path(np.__file__).parent.parent / "numpy.libs" / "libscipy_openblas64_*.so"))

_PROBE = """
import ctypes, sys
import governed_evidence.cli  # what the console script and `python -m governed_evidence` import first
import numpy
print(ctypes.CDLL(sys.argv[1]).scipy_openblas_get_num_threads64_())
"""

pytestmark = pytest.mark.skipif(not _LIB, reason="numpy is not built against the bundled scipy-openblas")


def _threads(**env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, _LIB[0]], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def test_the_cli_runs_blas_on_one_thread() -> None:
    assert _threads() == 1


@pytest.mark.parametrize("variable", ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"])
def test_an_operator_s_thread_setting_is_kept(variable: str) -> None:
    assert _threads(**{variable: "2"}) == 2
