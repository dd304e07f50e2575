"""Percentiles, peak memory and a description of the machine."""

from __future__ import annotations

import os
import platform
import resource
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["latency", "load_average", "machine", "peak_rss_mb"]


def latency(samples_ms: list[float]) -> dict[str, float]:
    a = np.asarray(samples_ms, dtype=np.float64)
    return {
        "n": len(samples_ms),
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "p99": round(float(np.percentile(a, 99)), 2),
        "mean": round(float(a.mean()), 2),
    }


def peak_rss_mb() -> float:
    """Peak resident set size of this process (ru_maxrss is in KiB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def load_average() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    cpu = "unknown"
    mem_kb = 0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    import apsw
    import sqlite_vec

    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": apsw.sqlite_lib_version(),
        "sqlite_vec": sqlite_vec.__version__ if hasattr(sqlite_vec, "__version__") else "?",
        "numpy": np.__version__,
    }
