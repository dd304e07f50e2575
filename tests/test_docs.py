"""The documentation an MCP user reads: links that resolve, a skill that names real tools,
server instructions that cover every tool, and the licence the package declares."""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from pathlib import Path
from urllib.parse import unquote

import httpx
import yaml
from fastmcp import Client

from governed_evidence import composition
from governed_evidence.config import Settings
from governed_evidence.mcp import build_app
from governed_evidence.sdmx.service import SdmxService
from tests.helpers import HashEmbedder

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
SKILL = REPO / "skills" / "governed-evidence" / "SKILL.md"
SURFACE = REPO / "tests" / "mcp" / "surface.json"

#: Markdown inline links and images: [text](target) / ![alt](target).
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)


def _tool_names() -> set[str]:
    return set(json.loads(SURFACE.read_text(encoding="utf-8"))["tools"])


def _local_links(path: Path) -> list[str]:
    """Relative link targets of a Markdown file, code blocks left out."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def _anchors(path: Path) -> set[str]:
    """GitHub-style heading anchors of a Markdown file."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        anchors.add(slug)
    return anchors


def _broken(path: Path, targets: list[str]) -> list[str]:
    broken = []
    for target in targets:
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    return broken


def test_every_docs_link_in_the_readme_resolves() -> None:
    links = _local_links(README)
    to_docs = [t for t in links if t.startswith("docs/")]
    # The reference pages a newcomer is sent to are linked from the README.
    for page in ("configuration.md", "clients.md", "troubleshooting.md", "tools.md", "labelling.md", "upgrading.md"):
        assert any(t.partition("#")[0] == f"docs/{page}" for t in to_docs), f"README.md does not link docs/{page}"
    assert not _broken(README, links), f"README.md links that do not resolve: {_broken(README, links)}"


def test_links_between_the_docs_resolve() -> None:
    pages = [*sorted(DOCS.glob("*.md")), SKILL, REPO / "CONTRIBUTING.md"]
    broken = {str(p.relative_to(REPO)): _broken(p, _local_links(p)) for p in pages}
    assert not {k: v for k, v in broken.items() if v}


def test_the_readme_still_starts_with_make_demo_and_make_test() -> None:
    start = README.read_text(encoding="utf-8").split("\n## ", 2)[1]
    assert "make demo" in start and "make test" in start


def test_the_skill_has_front_matter_and_names_only_real_tools() -> None:
    text = SKILL.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front_text, body = text[4:].split("\n---\n", 1)
    front = yaml.safe_load(front_text)
    assert set(front) >= {"name", "description"}
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", front["name"]) and len(front["name"]) <= 64
    assert front["name"] == SKILL.parent.name
    assert isinstance(front["description"], str) and 0 < len(front["description"]) <= 1024

    tools = _tool_names()
    # Every snake_case name in backticks or followed by "(" that looks like a tool must be one.
    named = set(re.findall(r"\b([a-z]+(?:_[a-z]+)+)\b", text))
    tool_like = {n for n in named if re.match(r"^(search|read|list|index|describe|get)_", n)}
    assert tool_like, "the skill names no tools"
    assert tool_like <= tools, f"the skill names tools that do not exist: {sorted(tool_like - tools)}"
    # The statistics calls are described in their order.
    order = [body.index(name) for name in ("search_datasets", "describe_dataset", "get_data")]
    assert order == sorted(order)
    assert "NO_RELEVANT_CONTEXT" in body


def test_the_server_instructions_cover_every_tool(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "no-index.sqlite", sdmx_cache_path=tmp_path / "sdmx.sqlite")
    documents = composition.search_service(
        settings, db=settings.db, ceiling=settings.ceiling_level, embedder_factory=HashEmbedder
    )
    statistics = SdmxService.from_settings(settings, transport=httpx.MockTransport(lambda _: httpx.Response(503)))

    async def instructions(with_statistics: bool) -> tuple[str, set[str]]:
        async with Client(build_app(documents, statistics if with_statistics else None)) as client:
            listed = {t.name for t in await client.list_tools()}
            return client.instructions or "", listed

    try:
        full, listed = asyncio.run(instructions(True))
        documents_only, listed_documents = asyncio.run(instructions(False))
    finally:
        statistics.close()
        documents.reader.close()
    assert listed == _tool_names()
    searchable = {"search_documents", "read_passage", "search_datasets", "describe_dataset", "get_data"}
    assert all(name in full for name in searchable)
    assert full.index("search_datasets") < full.index("describe_dataset") < full.index("get_data")
    assert "NO_RELEVANT_CONTEXT" in full and "source_url" in full
    # Without the statistics tools, the instructions do not mention them.
    assert not any(name in documents_only for name in ("search_datasets", "describe_dataset", "get_data"))
    assert not listed_documents & {"search_datasets", "describe_dataset", "get_data"}


def test_the_licence_is_apache_2_and_pyproject_agrees() -> None:
    licence = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert licence.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in licence
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project["license"]
    assert (declared.get("text") if isinstance(declared, dict) else declared) == "Apache-2.0"


def test_the_performance_findings_are_the_kept_file() -> None:
    """docs/performance.md is generated; its findings section is copied from
    benchmarks/findings.md. An edit made to the generated file alone is lost at the next run."""
    generated = (DOCS / "performance.md").read_text(encoding="utf-8")
    kept = (REPO / "benchmarks" / "findings.md").read_text(encoding="utf-8").rstrip()
    heading = kept.splitlines()[0]
    assert heading.startswith("## ")
    assert generated.count(heading) == 1
    assert generated[generated.index(heading) :].rstrip() == kept
