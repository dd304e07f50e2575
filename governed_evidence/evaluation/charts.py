"""The evaluation report's charts, drawn by matplotlib as SVG (the optional ``report`` extra).

Every chart is returned as SVG text ready to inline in one HTML page: no XML prolog, no
document type, no metadata and no namespace declarations (an HTML parser gives ``<svg>`` its
namespace), so the page names no address at all; ids are salted per chart so two charts in one
page never share a clip path. Text stays text (``svg.fonttype: none``), drawn in the reader's
own sans-serif font.

Each chart draws with colours no other chart uses (:data:`SLICE_COLOURS`, :data:`TRADEOFF_COLOURS`,
:data:`SHIPPED_COLOUR`, :data:`RECALL_COLOURS`), which is how the rendering test finds each one
in a screenshot.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from governed_evidence.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "INSTALL_HINT",
    "RECALL_COLOURS",
    "SHIPPED_COLOUR",
    "SLICE_COLOURS",
    "TRADEOFF_COLOURS",
    "figure",
    "recall_chart",
    "require_matplotlib",
    "slices_chart",
    "svg_text",
    "tradeoff_chart",
]

INSTALL_HINT = "pip install 'governed-evidence[report]' (or, in a checkout, make install)"

#: Pass share per slice, one bar per mode.
SLICE_COLOURS = {"keyword": "#9ecae1", "semantic": "#4292c6", "hybrid": "#08519c"}
#: The trade-off curve, one line per mode.
TRADEOFF_COLOURS = {"keyword": "#a1d99b", "semantic": "#41ab5d", "hybrid": "#006d2c"}
#: The shipped threshold's point on each curve.
SHIPPED_COLOUR = "#e6550d"
#: Recall before the gate at 10 and at 50 candidates.
RECALL_COLOURS = {"recall@10": "#756bb1", "recall@50": "#bcbddc"}

_XML_PROLOG = re.compile(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_NAMESPACES = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')


def require_matplotlib() -> None:
    """Fail before any work when the ``report`` extra is not installed, saying how to install it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(f"the report's charts need matplotlib, which is not installed: {INSTALL_HINT}") from None


def figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches, drawn without a display (no pyplot state)."""
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig


def svg_text(fig: Figure, salt: str, *, inline: bool = True) -> str:
    """``fig`` as SVG text; ``inline``: stripped to what an HTML page needs (the module says why).
    ``salt`` makes the chart's ids its own, and the output the same for the same figure."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none", "font.family": "sans-serif"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    if not inline:
        return text
    text = _METADATA.sub("", _XML_PROLOG.sub("", text))
    head, _, rest = text.partition(">")
    return _NAMESPACES.sub("", head) + ">" + rest


def _percent_axis(axis: Any) -> None:
    from matplotlib.ticker import PercentFormatter

    axis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))


def slices_chart(slices: Sequence[Mapping[str, Any]], salt: str = "slices") -> str:
    """The share of each slice's questions that passed, one bar per mode, every slice run."""
    names = list(dict.fromkeys(s["slice"] for s in slices))
    modes = [m for m in SLICE_COLOURS if any(s["mode"] == m for s in slices)]
    fig = figure(7.5, 0.45 * len(names) * max(1, len(modes)) ** 0.5 + 1.2)
    ax = fig.add_subplot()
    height = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        by_slice = {s["slice"]: s for s in slices if s["mode"] == mode}
        ys = [i + (j - (len(modes) - 1) / 2) * height for i, name in enumerate(names) if name in by_slice]
        shares = [by_slice[n]["pass"] / max(1, by_slice[n]["n"]) for n in names if n in by_slice]
        ax.barh(ys, shares, height=height * 0.92, color=SLICE_COLOURS[mode], label=mode)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    _percent_axis(ax.xaxis)
    ax.set_xlabel("questions passed")
    fig.legend(loc="outside upper center", ncol=len(modes), fontsize="small", frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return svg_text(fig, salt)


def tradeoff_chart(corpus: str, curves: Mapping[str, Mapping[str, Any]], salt: str) -> str:
    """One corpus's gate trade-off, one line per mode (``curves``: mode -> tradeoff_curve), the
    shipped threshold marked on each."""
    fig = figure(6.0, 4.4)
    ax = fig.add_subplot()
    # Modes whose shipped points coincide share one label.
    shipped_at: dict[tuple[float, float], list[str]] = {}
    for mode, curve in curves.items():
        colour = TRADEOFF_COLOURS.get(mode, "#444444")
        xs = [p["falsely_withheld"] for p in curve["points"]]
        ys = [p["abstained"] for p in curve["points"]]
        ax.plot(xs, ys, color=colour, linewidth=3, label=mode)
        shipped = curve["shipped"]
        shipped_at.setdefault((shipped["falsely_withheld"], shipped["abstained"]), []).append(mode)
    threshold = next(iter(curves.values()))["shipped"]["threshold"] if curves else 0.0
    for (x, y), modes in shipped_at.items():
        ax.plot([x], [y], marker="D", markersize=13, color=SHIPPED_COLOUR, markeredgecolor="#000000",
                linestyle="none", zorder=5)  # fmt: skip
        ax.annotate(
            f"{', '.join(modes)} at {threshold:g}",
            (x, y),
            xytext=(12, -14),
            textcoords="offset points",
            fontsize="small",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "#ffffff", "edgecolor": "none", "alpha": 0.8},
        )
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    _percent_axis(ax.xaxis)
    _percent_axis(ax.yaxis)
    ax.set_xlabel("answerable questions falsely withheld")
    ax.set_ylabel("unanswerable questions abstained on")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small", frameon=False)
    return svg_text(fig, salt)


def recall_chart(recall: Mapping[str, Mapping[str, Mapping[str, Any]]], salt: str) -> str:
    """Recall before the gate at 10 and 50 (``recall``: mode -> recall_figures), per slice and mode."""
    groups = [(mode, name) for mode, figures in recall.items() for name in figures]
    fig = figure(7.5, 3.4)
    ax = fig.add_subplot()
    width = 0.38
    for k, (metric, colour) in enumerate(RECALL_COLOURS.items()):
        xs = [i + (k - 0.5) * width for i in range(len(groups))]
        values = [recall[mode][name][metric] for mode, name in groups]
        ax.bar(xs, values, width=width * 0.95, color=colour, label=metric)
    ax.set_xticks(range(len(groups)), [f"{name}\n{mode}" for mode, name in groups], fontsize="small")
    ax.set_ylim(0, 1.05)
    _percent_axis(ax.yaxis)
    ax.set_ylabel("answer among the candidates")
    fig.legend(loc="outside upper center", ncol=2, fontsize="small", frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return svg_text(fig, salt)
