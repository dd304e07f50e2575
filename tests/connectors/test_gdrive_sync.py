"""Mirroring a Google Drive shared drive (against tests/connectors/drive_server.py)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from governed_evidence.config import Settings
from governed_evidence.connectors.command import sync
from governed_evidence.connectors.config import ConnectorConfig, load_config
from governed_evidence.connectors.mirror import read_state
from governed_evidence.errors import ConfigError
from tests.connectors.drive_server import ACCOUNT, DOC, FOLDER, FORM, SHARED_DRIVE, SHEET, SLIDES, Drive, Server, start

KEY_ENV = "TEST_DRIVE_PRIVATE_KEY"
#: A Drive label with a selection field, as Drive's label schema names them.
LABEL = "labelSensitivity01"
FIELD = "fieldLevel"


@pytest.fixture
def drive(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Drive, Server, str]]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    monkeypatch.setenv(KEY_ENV, pem)
    state = Drive(key)
    server, thread = start(state)
    yield state, server, pem
    server.shutdown()
    server.server_close()
    thread.join(5)


def config(tmp_path: Path, server: Server) -> ConnectorConfig:
    path = tmp_path / "drive.toml"
    path.write_text(
        f"""
mirror = "mirror"

[[source]]
name = "handbook"
kind = "google_drive"
service_account_email = "{ACCOUNT}"
private_key_env = "{KEY_ENV}"
drive_id = "{SHARED_DRIVE}"
drive_url = "{server.url}/drive/v3"
token_url = "{server.url}/token"

[source.labels]
"{LABEL}/{FIELD}=choicePublic" = "public"
"{LABEL}/{FIELD}=choiceInternal" = "internal"

[source.folders]
"Open/" = "public"
"Board/" = "restricted"
""",
        encoding="utf-8",
    )
    return load_config(path)


def levels(mirror: Path) -> dict[str, str]:
    rules = tomllib.loads((mirror / "_governance.toml").read_text())["rule"]
    return {rule["path"]: rule["classification"] for rule in rules[1:]}


def site(state: Drive) -> None:
    state.add("fo", "Open", FOLDER, SHARED_DRIVE)
    state.add("fb", "Board", FOLDER, SHARED_DRIVE)
    state.add("fs", "Staff", FOLDER, SHARED_DRIVE)
    state.add("g1", "Guide", DOC, "fo", b"docx bytes")
    state.add("g2", "Rates", SHEET, "fs", b"xlsx bytes", **{LABEL: {FIELD: ["choiceInternal"]}})
    state.add("g3", "Deck.pptx", SLIDES, "fb", b"pptx bytes", **{LABEL: {FIELD: ["choicePublic"]}})
    state.add("g4", "notes.md", "text/markdown", "fs", b"# Notes\n\nstaff notes\n")
    state.add("g5", "Survey", FORM, "fo")
    state.add("g6", "faq.md", "text/markdown", "fs", b"# FAQ\n\nfaq\n", **{LABEL: {FIELD: ["choicePublic"]}})


def test_docs_sheets_and_slides_are_exported_and_levels_come_from_labels_and_folder_rules(
    tmp_path: Path, drive: tuple[Drive, Server, str]
) -> None:
    state, server, _ = drive
    site(state)
    cfg = config(tmp_path, server)
    report = sync(cfg, Settings())
    assert levels(cfg.mirror) == {
        "handbook/Open/Guide.docx": "public",  # the folder rule
        "handbook/Staff/Rates.xlsx": "internal",  # the label
        "handbook/Board/Deck.pptx": "restricted",  # a public label under a restricted folder: the stricter
        "handbook/Staff/notes.md": "restricted",  # neither: the most sensitive level
        "handbook/Staff/faq.md": "public",
    }
    assert (cfg.mirror / "handbook/Staff/Rates.xlsx").read_bytes() == b"xlsx bytes"
    assert sorted(mime.rsplit(".", 1)[-1] for _, mime in state.exports) == ["document", "presentation", "sheet"]
    assert dict(report.sources[0].skipped) == {"item g5": "a Google form has no export ingest reads"}
    files = read_state(cfg.mirror)["sources"]["handbook"]["files"]
    assert files["g1"]["link"] == "https://docs.google.com/document/d/g1/edit"


def test_the_changes_feed_moves_relabels_and_removes_and_an_unchanged_drive_downloads_nothing(
    tmp_path: Path, drive: tuple[Drive, Server, str]
) -> None:
    state, server, _ = drive
    site(state)
    cfg = config(tmp_path, server)
    sync(cfg, Settings())
    fetched = len(state.downloads) + len(state.exports)
    again = sync(cfg, Settings())
    assert not again.changed and len(state.downloads) + len(state.exports) == fetched
    state.change("g1", parent="fb")  # from the public folder into the restricted one
    state.change("g6", labels={LABEL: {FIELD: ["choiceInternal"]}})
    state.change("g4", trashed=True)
    state.change("g2", removed=True)
    state.change("fs", name="People")
    report = sync(cfg, Settings())
    assert not report.sources[0].full
    assert levels(cfg.mirror) == {
        "handbook/Board/Guide.docx": "restricted",
        "handbook/Board/Deck.pptx": "restricted",
        "handbook/People/faq.md": "internal",
    }


def test_a_key_that_is_not_one_is_named_by_its_variable_never_shown(
    tmp_path: Path, drive: tuple[Drive, Server, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, server, pem = drive
    site(state)
    monkeypatch.setenv(KEY_ENV, pem[:200])  # cut: not a key any more
    with pytest.raises(ConfigError, match=KEY_ENV) as caught:
        sync(config(tmp_path, server), Settings())
    assert pem[40:80] not in str(caught.value)


def test_refresh_serves_an_exported_doc_and_a_file_moved_into_a_restricted_folder_is_never_served_below(
    tmp_path: Path, drive: tuple[Drive, Server, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from governed_evidence.config import Classification
    from governed_evidence.connectors.command import refresh
    from governed_evidence.search.service import SearchService
    from tests.helpers import HashEmbedder

    def make(settings: Settings, name: str | None = None) -> HashEmbedder:
        return HashEmbedder()

    monkeypatch.setattr("governed_evidence.embeddings.factory.make_ingest_embedder", make)
    state, server, _ = drive
    # A real Word file stands in for Drive's DOCX export of a Google Doc.
    docx = (Path(__file__).parents[2] / "data/sample_corpus/internal/hr/onboarding-guide.docx").read_bytes()
    state.add("fo", "Open", FOLDER, SHARED_DRIVE)
    state.add("fb", "Board", FOLDER, SHARED_DRIVE)
    state.add("g1", "Onboarding", DOC, "fo", docx)
    state.add("g2", "minutes.md", "text/markdown", "fo", b"# Minutes\n\nthe quorvex merger was approved\n")
    cfg = config(tmp_path, server)
    db = tmp_path / "index.sqlite"
    refresh(cfg, Settings(), db=db, ceiling=Classification.RESTRICTED)
    public = SearchService(db, ceiling=Classification.PUBLIC, embedder_factory=HashEmbedder)
    listed = {d.document: d.source_link for d in public.list_sources().documents}
    assert listed == {
        "handbook/Open/Onboarding.docx": "https://docs.google.com/document/d/g1/edit",
        "handbook/Open/minutes.md": "https://docs.google.com/document/d/g2/edit",
    }
    assert public.search("quorvex merger", mode="keyword", confidence_level="normal").results
    state.change("g2", parent="fb")  # moved from the public folder into the restricted one
    refresh(cfg, Settings(), db=db, ceiling=Classification.RESTRICTED)
    found = public.search("quorvex merger", mode="keyword", confidence_level="normal").results
    assert [r for r in found if "minutes" in r.document] == []  # must be zero
    assert "handbook/Board/minutes.md" not in {d.document for d in public.list_sources().documents}
    public.close()
