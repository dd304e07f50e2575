"""``search``: the policy documents, as the MCP tool answers."""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING, Any

from governed_evidence.commands.common import LEVELS, naming_the_index, print_visibility, search_service
from governed_evidence.config import Settings
from governed_evidence.search.limits import CONFIDENCE_LEVELS, DEFAULT_LIMIT, MAX_LIMIT, SEARCH_MODES

if TYPE_CHECKING:
    from governed_evidence.search.models import SearchResponse

__all__ = ["print_search", "register", "run_search"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("search", help="search the policy documents")
    p.add_argument("query")
    p.add_argument("--db")
    p.add_argument("--ceiling", choices=LEVELS, help="caller ceiling (default: $GOVERNED_EVIDENCE_CEILING or public)")
    p.add_argument("--mode", choices=SEARCH_MODES, default=SEARCH_MODES[0])
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"1-{MAX_LIMIT} (default {DEFAULT_LIMIT})")
    p.add_argument("--confidence", choices=CONFIDENCE_LEVELS, default=CONFIDENCE_LEVELS[0])
    p.add_argument("--json", action="store_true", help="print exactly what the MCP tool returns")
    p.set_defaults(func=run_search)


def run_search(args: argparse.Namespace, settings: Settings) -> int:
    service = search_service(args, settings)
    db = service.db
    with naming_the_index(db):
        response = service.search(args.query, limit=args.limit, mode=args.mode, confidence_level=args.confidence)
    if args.json:
        print(response.model_dump_json(indent=2))
    else:
        print_search(response)
        if response.status == "NO_RELEVANT_CONTEXT":
            print_visibility(db, service.ceiling)
    return 0


def print_search(response: SearchResponse) -> None:
    mode: str = response.search_mode
    if response.search_mode_reason:
        mode += f" (fallback: {response.search_mode_reason})"
    print(f"mode: {mode} | confidence: {response.confidence} | ceiling: {response.ceiling}")
    if response.status == "NO_RELEVANT_CONTEXT":
        print(f"NO_RELEVANT_CONTEXT: {response.reason}")
        return
    for r in response.results:
        # A workbook's lines are its sheet's rows, a deck's pages its slides.
        suffix = r.document.lower().rpartition(".")[2]
        where = (
            f"{'rows' if suffix == 'xlsx' else 'lines'} {r.lines.start}-{r.lines.end}"
            if r.lines
            else f"{'slides' if suffix == 'pptx' else 'pages'} {r.pages.start}-{r.pages.end}"
            if r.pages
            else ""
        )
        print(f"\n[{r.rank}] {r.citation_id}")
        facts = f"{where}; {r.classification}; {r.matched_by}; confidence {r.confidence:.2f}"
        print(f"    {r.title} — {r.heading or '(top)'} ({facts})")
        snippet = " ".join(r.text.split())
        print(textwrap.indent(textwrap.fill(snippet[:400] + ("…" if len(snippet) > 400 else ""), 96), "    "))
    if response.withheld:
        print(f"\n({response.withheld} weaker candidates withheld by the confidence gate)")
