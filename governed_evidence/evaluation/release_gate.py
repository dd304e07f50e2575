"""The eval gate: thresholds from a committed TOML file, checked against slice reports.

Governance slices (denied, secret, superseded) are hard zeros: a gate file may not loosen
them, so a release can never be waved through with a leak.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from governed_evidence.errors import ConfigError
from governed_evidence.evaluation.runner import SliceReport

__all__ = ["MUST_BE_ZERO", "Check", "GateSpec", "evaluate_gate", "load_gate"]

#: (slice, metric) pairs whose only acceptable value is 0.
MUST_BE_ZERO = {("denied", "leaks"), ("secret", "violations"), ("superseded", "superseded_cited")}

_BOUNDS = {
    "min_hit_at_1": ("hit@1", "min"),
    "min_hit_at_3": ("hit@3", "min"),
    "min_mrr": ("mrr", "min"),
    "max_false_abstention": ("false_abstention", "max"),
    "min_abstention_rate": ("abstention_rate", "min"),
    "min_normal_abstention_rate": ("normal_abstention_rate", "min"),
    "min_page_at_10": ("page@10", "min"),
    "min_recall_at_10": ("recall@10", "min"),
    "max_superseded_cited": ("superseded_cited", "max"),
    "max_leaks": ("leaks", "max"),
    "max_violations": ("violations", "max"),
}

GateSpec = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Check:
    slice: str
    metric: str
    kind: str
    bound: float
    value: float | None
    must_be_zero: bool

    @property
    def passed(self) -> bool:
        if self.value is None:
            return False
        return self.value >= self.bound if self.kind == "min" else self.value <= self.bound


def load_gate(path: Path) -> GateSpec:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the eval gate file {path.name}: {exc}") from None
    spec: GateSpec = {}
    for slice_name, bounds in raw.items():
        if not isinstance(bounds, dict):
            raise ConfigError(f"gate section [{slice_name}] must be a table")
        spec[slice_name] = {}
        for key, value in bounds.items():
            if key not in _BOUNDS or not isinstance(value, int | float):
                raise ConfigError(f"gate [{slice_name}] {key}: unknown bound or not a number")
            metric, _ = _BOUNDS[key]
            if (slice_name, metric) in MUST_BE_ZERO and value != 0:
                raise ConfigError(f"gate [{slice_name}] {key} must be 0: leaks are never acceptable")
            spec[slice_name][key] = float(value)
    for slice_name, metric in MUST_BE_ZERO:
        spec.setdefault(slice_name, {})
        key = next(k for k, (m, _) in _BOUNDS.items() if m == metric)
        spec[slice_name].setdefault(key, 0.0)
    return spec


def evaluate_gate(spec: GateSpec, reports: list[SliceReport]) -> list[Check]:
    by_slice = {r.slice: r for r in reports}
    checks: list[Check] = []
    for slice_name, bounds in sorted(spec.items()):
        report = by_slice.get(slice_name)
        for key, bound in sorted(bounds.items()):
            metric, kind = _BOUNDS[key]
            value = report.metrics.get(metric) if report else None
            checks.append(Check(slice_name, metric, kind, bound, value, (slice_name, metric) in MUST_BE_ZERO))
    return checks
