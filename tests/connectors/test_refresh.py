"""``refresh``: a mocked SharePoint site synced and ingested, changed, and refreshed again.

What must hold: the index's levels are exactly the label mapping's; after relabelling, moving
and deleting, the index equals a fresh sync + ``--force`` build and nothing moved above a
caller's ceiling reaches that caller; a refresh with no changes downloads and rebuilds nothing;
a running service serves the rebuilt index without a restart; the client secret appears in
no output, log line, mirror file or index.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from governed_evidence.cli import main
from governed_evidence.config import Classification, Settings
from governed_evidence.connectors.command import refresh
from governed_evidence.connectors.config import ConnectorConfig
from governed_evidence.errors import NotFoundError
from governed_evidence.search.service import SearchService
from tests.connectors.conftest import INTERNAL_LABEL, PUBLIC_LABEL, RESTRICTED_LABEL, SECRET, config_for, text
from tests.connectors.graph_server import GraphDrive, Server
from tests.helpers import HashEmbedder

Drive = tuple[GraphDrive, Server]
LABELS = [PUBLIC_LABEL, INTERNAL_LABEL, RESTRICTED_LABEL]
FOLDERS = {"f-open": "Open", "f-staff": "Staff", "f-board": "Board"}


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(settings: Settings, name: str | None = None) -> HashEmbedder:
        return HashEmbedder()

    monkeypatch.setattr("governed_evidence.embeddings.factory.make_embedder", make)
    monkeypatch.setattr("governed_evidence.embeddings.factory.make_ingest_embedder", make)


def site(graph: GraphDrive, count: int = 200) -> dict[str, Classification]:
    """``count`` documents over three folders, each with one of three labels; their expected levels."""
    for folder_id, name in FOLDERS.items():
        graph.add(folder_id, name, "root", "folder")
    expected: dict[str, Classification] = {}
    for n in range(count):
        folder_id = list(FOLDERS)[n % 3]
        label = n % 3 if n % 7 else (n + 1) % 3  # labels not aligned with folders everywhere
        graph.add(
            f"d{n}", f"doc-{n}.md", folder_id, "file", text(f"Policy {n}", f"rule zq{n}x applies"), [LABELS[label]]
        )
        expected[f"policies/{FOLDERS[folder_id]}/doc-{n}.md"] = Classification(label)
    return expected


def index_levels(db: Path) -> dict[str, Classification]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            path: Classification(level) for path, level in conn.execute("SELECT path, classification FROM documents")
        }
    finally:
        conn.close()


def index_contents(db: Path) -> set[tuple[object, ...]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return set(
            conn.execute(
                "SELECT d.path, d.classification, d.content_hash, d.title, p.citation_id, p.text, p.classification, "
                "p.searchable FROM documents d JOIN passages p ON p.document_id = d.id"
            )
        )
    finally:
        conn.close()


def run(config: ConnectorConfig, *, force: bool = False) -> tuple[object, object]:
    assert config.index is not None
    return refresh(config, Settings(), db=config.index, ceiling=Classification.RESTRICTED, force=force)


def test_refresh_builds_levels_exactly_as_mapped_and_follows_every_change(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    expected = site(graph)
    config = config_for(tmp_path, server)
    assert config.index is not None
    run(config)
    assert index_levels(config.index) == expected

    public = SearchService(config.index, ceiling=Classification.PUBLIC, embedder_factory=HashEmbedder)
    moved = next(n for n in range(200) if n % 3 == 0 and n % 7)  # public, in Open
    before = public.search(f"rule zq{moved}x", mode="keyword", confidence_level="normal")
    assert [r.document for r in before.results][:1] == [f"policies/Open/doc-{moved}.md"]
    old_citation = before.results[0].citation_id
    # Results, passages and the listing cite the file's link at its source.
    link = f"https://contoso.sharepoint.com/sites/policies/Shared%20Documents/Open/doc-{moved}.md"
    assert before.results[0].source_link == link
    assert public.read_passage(old_citation).passage.source_link == link
    listed = {d.document: d.source_link for d in public.list_sources().documents}
    assert listed[f"policies/Open/doc-{moved}.md"] == link

    # Relabel, move (into the restricted folder, relabelled as the board's files are), delete.
    graph.change(f"d{moved}", parent="f-board", labels=[RESTRICTED_LABEL])
    for n in (1, 4, 10):
        graph.change(f"d{n}", labels=[PUBLIC_LABEL])
    for n in (2, 5):
        graph.change(f"d{n}", deleted=True)
    graph.add("d900", "new.md", "f-staff", "file", text("New", "rule zq900x applies"), [INTERNAL_LABEL])
    downloads = len(graph.downloads)
    _, built = run(config)
    # Only the new file: moving and relabelling change no content, so the mirrored bytes are kept.
    assert graph.downloads[downloads:] == ["d900"]
    assert built.build == "full"  # the governance file changed: every file parsed again, embeddings reused
    del expected[f"policies/Open/doc-{moved}.md"]
    expected[f"policies/Board/doc-{moved}.md"] = Classification.RESTRICTED
    for n in (1, 4, 10):
        path = f"policies/{FOLDERS[list(FOLDERS)[n % 3]]}/doc-{n}.md"
        expected[path] = Classification.PUBLIC
    for n in (2, 5):
        del expected[f"policies/{FOLDERS[list(FOLDERS)[n % 3]]}/doc-{n}.md"]
    expected["policies/Staff/new.md"] = Classification.INTERNAL
    assert index_levels(config.index) == expected

    # The running public service (opened before the refresh) serves the new index, without the moved file.
    after = public.search(f"rule zq{moved}x", mode="keyword", confidence_level="normal")
    moved_paths = {f"policies/Open/doc-{moved}.md", f"policies/Board/doc-{moved}.md"}
    assert [r for r in after.results if r.document in moved_paths] == []  # must be zero
    assert [d for d in public.list_sources().documents if d.document in moved_paths] == []
    with pytest.raises(NotFoundError):
        public.read_passage(old_citation)
    assert [r.document for r in public.search("rule zq1x", mode="keyword", confidence_level="normal").results][:1] == [
        "policies/Staff/doc-1.md"
    ]
    leaked = [
        r.document
        for n in range(200)
        for r in public.search(f"rule zq{n}x", mode="keyword", confidence_level="normal").results
        if expected.get(r.document, Classification.RESTRICTED) > Classification.PUBLIC
    ]
    assert leaked == []  # must be zero
    public.close()

    # The refreshed index equals a fresh sync + --force build of the same site.
    fresh = config_for(tmp_path, server, name="fresh.toml")
    fresh = ConnectorConfig(fresh.path, tmp_path / "fresh-mirror", tmp_path / "fresh.sqlite", fresh.sources)
    run(fresh, force=True)
    assert index_contents(config.index) == index_contents(tmp_path / "fresh.sqlite")


def test_a_refresh_with_no_changes_downloads_nothing_and_rebuilds_nothing(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph, 30)
    config = config_for(tmp_path, server)
    assert config.index is not None
    run(config)
    stat = config.index.stat()
    downloads = len(graph.downloads)
    sync_report, built = run(config)
    assert len(graph.downloads) == downloads and not sync_report.changed  # type: ignore[attr-defined]
    assert built.unchanged  # type: ignore[attr-defined]
    assert (config.index.stat().st_ino, config.index.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)


def test_no_secret_in_any_output_log_mirror_file_or_index(
    tmp_path: Path, drive: Drive, capfd: pytest.CaptureFixture[str]
) -> None:
    graph, server = drive
    site(graph, 12)
    path = config_for(tmp_path, server).path
    assert main(["--verbose", "refresh", str(path)]) == 0
    assert main(["--verbose", "sync", str(path), "--json"]) == 0
    graph.secret, graph.tokens = "rotated", set()
    assert main(["--verbose", "refresh", str(path)]) == 1  # the token endpoint refuses the secret
    out, err = capfd.readouterr()
    assert "Indexed 12 documents" in out and "HTTP 401" in err and "connector_synced" in err
    assert SECRET not in out and SECRET not in err
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in written)
    assert [p for p in written if SECRET.encode() in p.read_bytes()] == []
