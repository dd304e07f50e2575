"""``read`` and ``sources``: a cited passage and the documents listing, as the MCP tools
``read_passage`` and ``list_sources`` answer."""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING, Any

from governed_evidence.commands.common import LEVELS, naming_the_index, search_service
from governed_evidence.config import Settings
from governed_evidence.search.limits import MAX_CONTEXT

if TYPE_CHECKING:
    from governed_evidence.search.models import PassageView, ReadPassageResponse, SourcesResponse

__all__ = ["print_passage", "print_sources", "register", "run_read", "run_sources"]

_CEILING_HELP = "caller ceiling (default: $GOVERNED_EVIDENCE_CEILING or public)"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("read", help="read a cited passage, optionally with its neighbours (as read_passage)")
    p.add_argument("citation_id", metavar="CITATION_ID", help="a citation id from search, e.g. travel.md#hotels:L12-18")
    p.add_argument("--db")
    p.add_argument("--ceiling", choices=LEVELS, help=_CEILING_HELP)
    p.add_argument(
        "--context",
        type=int,
        default=0,
        help=f"passages of the same document to show before and after (0-{MAX_CONTEXT}, default 0)",
    )
    p.add_argument("--json", action="store_true", help="print exactly what the MCP tool returns")
    p.set_defaults(func=run_read)

    p = sub.add_parser("sources", help="the documents visible at a ceiling, with counts (as list_sources)")
    p.add_argument("--db")
    p.add_argument("--ceiling", choices=LEVELS, help=_CEILING_HELP)
    p.add_argument("--json", action="store_true", help="print exactly what the MCP tool returns")
    p.set_defaults(func=run_sources)


def run_read(args: argparse.Namespace, settings: Settings) -> int:
    service = search_service(args, settings)
    with naming_the_index(service.db):
        response = service.read_passage(args.citation_id, args.context)
    if args.json:
        print(response.model_dump_json(indent=2))
    else:
        print_passage(response)
    return 0


def run_sources(args: argparse.Namespace, settings: Settings) -> int:
    service = search_service(args, settings)
    with naming_the_index(service.db):
        response = service.list_sources()
    if args.json:
        print(response.model_dump_json(indent=2))
    else:
        print_sources(response)
    return 0


def _where(view: PassageView) -> str:
    suffix = view.document.lower().rpartition(".")[2]
    if view.lines:
        return f"{'rows' if suffix == 'xlsx' else 'lines'} {view.lines.start}-{view.lines.end}"
    if view.pages:
        return f"{'slides' if suffix == 'pptx' else 'pages'} {view.pages.start}-{view.pages.end}"
    return ""


def _print_view(view: PassageView) -> None:
    facts = "; ".join(f for f in (_where(view), view.classification, view.status) if f)
    marker = "" if view.position == 0 else f" [{view.position:+d}]"
    print(f"{view.citation_id}{marker}")
    print(f"    {view.title} — {view.heading or '(top)'} ({facts}{'; overdue for review' if view.stale else ''})")
    print(textwrap.indent(view.text, "    "))


def print_passage(response: ReadPassageResponse) -> None:
    for view in [*response.before, response.passage, *response.after]:
        _print_view(view)
        print()
    if response.superseded_by:
        print(f"superseded: cite {response.superseded_by} instead")
    print(f"({response.notice})")


def print_sources(response: SourcesResponse) -> None:
    total = sum(c.documents for c in response.totals)
    print(f"ceiling: {response.ceiling} | documents: {total}")
    for c in response.totals:
        counts = f"{c.documents:>6} documents {c.passages:>8} passages"
        print(f"  {c.classification:<10} {counts} ({c.superseded_documents} superseded)")
    for d in response.documents:
        state = d.status if not d.superseded_by else f"superseded by {d.superseded_by}"
        print(f"{d.classification:<10} {d.passages:>5}  {d.document} — {d.title} ({d.format}, {state})")
    if response.truncated:
        print(f"(listing truncated after {len(response.documents)} documents)")
