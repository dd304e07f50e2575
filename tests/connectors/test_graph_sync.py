"""Mirroring a Microsoft Graph drive: levels, links, changes, faults (against tests/connectors/graph_server.py)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from governed_evidence.config import Settings
from governed_evidence.connectors.command import sync
from governed_evidence.connectors.mirror import read_state
from governed_evidence.errors import ConnectorError
from tests.connectors.conftest import (
    INTERNAL_LABEL,
    PUBLIC_LABEL,
    RESTRICTED_LABEL,
    SECRET,
    UNKNOWN_LABEL,
    config_for,
    text,
)
from tests.connectors.graph_server import GraphDrive, Server

Drive = tuple[GraphDrive, Server]


def levels(mirror: Path) -> dict[str, str]:
    """Each mirrored file's level as the mirror's governance file gives it."""
    rules = tomllib.loads((mirror / "_governance.toml").read_text())["rule"]
    assert rules[0] == {"path": "/", "classification": "restricted"}
    return {rule["path"]: rule["classification"] for rule in rules[1:]}


def files(mirror: Path) -> set[str]:
    return {
        str(p.relative_to(mirror))
        for p in mirror.rglob("*")
        if p.is_file() and not p.name.startswith(("_governance", "state")) and ".connector" not in p.parts
    }


def leftovers(folder: Path) -> list[Path]:
    """A staging folder or a previous mirror left behind."""
    return [*folder.glob(".mirror.staging-*"), *folder.glob(".mirror.previous")]


def site(graph: GraphDrive) -> None:
    graph.add("f-pub", "Public", "root", "folder")
    graph.add("f-hr", "HR", "root", "folder")
    graph.add("d1", "faq.md", "f-pub", "file", text("FAQ", "opening hours"), [PUBLIC_LABEL])
    graph.add("d2", "leave.md", "f-hr", "file", text("Leave", "annual leave days"), [INTERNAL_LABEL])
    graph.add("d3", "salaries.md", "f-hr", "file", text("Salaries", "pay bands"), [RESTRICTED_LABEL])
    graph.add("d4", "unlabelled.md", "f-pub", "file", text("Notes", "unlabelled notes"))
    graph.add("d5", "odd.md", "f-pub", "file", text("Odd", "odd label"), [UNKNOWN_LABEL])


def test_first_sync_mirrors_every_file_at_its_mapped_level_with_its_link(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    report = sync(config, Settings())
    assert report.changed and report.downloaded == 5
    assert levels(config.mirror) == {
        "policies/Public/faq.md": "public",
        "policies/HR/leave.md": "internal",
        "policies/HR/salaries.md": "restricted",
        # Unlabelled, and a label the mapping does not know: the most sensitive level.
        "policies/Public/unlabelled.md": "restricted",
        "policies/Public/odd.md": "restricted",
    }
    assert (config.mirror / "policies/HR/leave.md").read_bytes() == text("Leave", "annual leave days")
    entries = read_state(config.mirror)["sources"]["policies"]["files"]
    assert entries["d2"]["link"] == "https://contoso.sharepoint.com/sites/policies/Shared%20Documents/HR/leave.md"
    assert entries["d2"]["label"] == INTERNAL_LABEL and entries["d4"]["label"] is None
    # Downloads went to the pre-authenticated URL without the bearer token.
    assert sorted(graph.downloads) == ["d1", "d2", "d3", "d4", "d5"]
    assert graph.download_auth == []


def test_a_second_sync_with_no_changes_downloads_nothing_and_keeps_the_mirror(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    inode = os.stat(config.mirror / "_governance.toml").st_ino
    downloads = len(graph.downloads)
    report = sync(config, Settings())
    assert not report.changed and report.downloaded == 0
    assert len(graph.downloads) == downloads
    assert os.stat(config.mirror / "_governance.toml").st_ino == inode
    # The delta link moved on: the second sync asked only for changes since the first.
    assert "token=" in read_state(config.mirror)["sources"]["policies"]["source"]["delta_link"]


def test_created_changed_moved_renamed_relabelled_and_deleted_items_are_reflected(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    graph.downloads.clear()
    graph.add("d6", "new.md", "f-hr", "file", text("New", "a new policy"), [INTERNAL_LABEL])
    graph.change("d2", content=text("Leave", "annual leave days, revised"))
    graph.change("d1", parent="f-hr")  # moved from Public into HR: its label still decides
    graph.change("f-pub", name="Open")  # a folder renamed: delta lists the folder, not its files
    graph.change("d3", labels=[PUBLIC_LABEL])  # relabelled
    graph.change("d5", deleted=True)
    report = sync(config, Settings())
    assert report.changed
    assert levels(config.mirror) == {
        "policies/HR/faq.md": "public",
        "policies/HR/leave.md": "internal",
        "policies/HR/salaries.md": "public",
        "policies/HR/new.md": "internal",
        "policies/Open/unlabelled.md": "restricted",
    }
    assert files(config.mirror) == set(levels(config.mirror))
    assert (config.mirror / "policies/HR/leave.md").read_bytes() == text("Leave", "annual leave days, revised")
    # Only the new and the edited files were downloaded: a move, a rename or a relabel leaves the
    # content hash as it was, so the mirrored bytes are kept and only their path or level changes.
    assert sorted(graph.downloads) == ["d2", "d6"]


def test_an_expired_delta_link_enumerates_everything_again(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    graph.change("d4", deleted=True)
    graph.expired_before = graph.seq + 1  # every token handed out so far: 410 Gone
    report = sync(config, Settings())
    assert report.sources[0].full
    assert "policies/Public/unlabelled.md" not in levels(config.mirror)
    assert len(levels(config.mirror)) == 4


def test_a_download_failing_half_way_skips_that_file_and_the_next_sync_fetches_it(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    graph.truncate.add("d2")
    config = config_for(tmp_path, server)
    report = sync(config, Settings())
    skipped = dict(report.sources[0].skipped)
    assert "download failed" in skipped["policies/HR/leave.md"]
    assert not (config.mirror / "policies/HR/leave.md").exists()
    assert not list(config.mirror.rglob("*.part"))
    graph.truncate.clear()
    report = sync(config, Settings())
    assert report.downloaded == 1
    assert (config.mirror / "policies/HR/leave.md").read_bytes() == text("Leave", "annual leave days")


def test_a_failed_sync_keeps_the_last_good_mirror(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    before = {p: (config.mirror / p).read_bytes() for p in files(config.mirror)}
    state = (config.mirror / ".connector/state.json").read_bytes()
    graph.change("d3", deleted=True)
    graph.secret = "rotated"  # the token endpoint now refuses the configured secret
    graph.tokens.clear()
    with pytest.raises(ConnectorError, match="HTTP 401") as caught:
        sync(config, Settings())
    assert SECRET not in str(caught.value)
    assert {p: (config.mirror / p).read_bytes() for p in files(config.mirror)} == before
    assert (config.mirror / ".connector/state.json").read_bytes() == state
    assert leftovers(tmp_path) == []


def test_an_interrupted_sync_keeps_the_last_good_mirror(
    tmp_path: Path, drive: Drive, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    before = levels(config.mirror)
    graph.change("d1", deleted=True)
    graph.add("d7", "late.md", "f-hr", "file", text("Late", "late"), [PUBLIC_LABEL])

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("governed_evidence.connectors.graph.GraphDrive.download", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sync(config, Settings())
    assert levels(config.mirror) == before and files(config.mirror) == set(before)
    assert leftovers(tmp_path) == []


def test_a_sync_killed_between_the_two_renames_is_recovered(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    before = levels(config.mirror)
    # What a process killed after moving the old mirror aside (on a file system without an atomic exchange) leaves.
    os.rename(config.mirror, tmp_path / ".mirror.previous")
    report = sync(config, Settings())
    assert not report.changed and levels(config.mirror) == before


def test_a_token_that_expires_during_a_sync_is_replaced(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    graph.expire_tokens = True
    config = config_for(tmp_path, server)
    assert sync(config, Settings()).downloaded == 5
    assert levels(config.mirror)["policies/HR/leave.md"] == "internal"  # its labels were read with the new token
    assert graph.requests.count("POST /login/11111111-2222-3333-4444-555555555555/oauth2/v2.0/token") == 2


def test_throttling_is_waited_out_within_the_deadline(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    graph.throttle = 3
    config = config_for(tmp_path, server)
    assert sync(config, Settings()).downloaded == 5
    graph.throttle, graph.retry_after = 1, "3600"
    config = config_for(tmp_path, server, extra="deadline_seconds = 60")
    with pytest.raises(ConnectorError, match="past the sync's deadline"):
        sync(config, Settings())


def test_a_slow_source_fails_the_sync_in_time_and_keeps_the_mirror(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    before = levels(config.mirror)
    graph.change("d1", deleted=True)
    graph.delay = 2.0
    config = config_for(tmp_path, server, timeout=0.5)
    with pytest.raises(ConnectorError, match="did not answer in time"):
        sync(config, Settings())
    graph.delay = 0.0
    assert levels(config.mirror) == before


def test_unsafe_names_are_skipped_with_the_reason_and_nothing_is_written_outside(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    graph.add("f1", "..", "root", "folder")
    graph.add("n1", "escape.md", "f1", "file", text("Escape", "x"), [PUBLIC_LABEL])
    graph.add("n2", "CON.md", "root", "file", text("Con", "x"), [PUBLIC_LABEL])
    graph.add("n3", ".hidden.md", "root", "file", text("Hidden", "x"), [PUBLIC_LABEL])
    graph.add("n4", "x" * 300 + ".md", "root", "file", text("Long", "x"), [PUBLIC_LABEL])
    graph.add("n5", "a\\..\\b.md", "root", "file", text("Slash", "x"), [PUBLIC_LABEL])
    graph.add("n6", "fine.md", "root", "file", text("Fine", "fine"), [PUBLIC_LABEL])
    graph.add("n7", "FINE.md", "root", "file", text("Fine", "twice"), [PUBLIC_LABEL])
    graph.add("n8", "/etc/passwd.md", "root", "file", text("Abs", "x"), [PUBLIC_LABEL])
    config = config_for(tmp_path, server)
    report = sync(config, Settings())
    assert levels(config.mirror) == {"policies/FINE.md": "public"} or levels(config.mirror) == {
        "policies/fine.md": "public"
    }
    reasons = dict(report.sources[0].skipped)
    assert len(reasons) == 7
    assert "'..'" in reasons["item n1"] and "reserved" in reasons["item n2"] and "hidden" in reasons["item n3"]
    assert "longer than 255" in reasons["item n4"] and "separator" in reasons["item n5"]
    assert "separator" in reasons["item n8"]
    assert {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.md")} == {
        f"mirror/{path}" for path in levels(config.mirror)
    }


def test_a_file_renamed_to_a_credential_shaped_name_leaves_the_mirror_and_the_name_is_never_reported(
    tmp_path: Path, drive: Drive
) -> None:
    graph, server = drive
    site(graph)
    config = config_for(tmp_path, server)
    sync(config, Settings())
    key = "AKIAABCDEFGHIJKLMNOP.md"
    graph.change("d1", name=key)
    report = sync(config, Settings())
    assert "policies/Public/faq.md" not in levels(config.mirror)
    assert dict(report.sources[0].skipped)["item d1"].startswith("the name is credential-shaped")
    assert "AKIA" not in str(report.as_dict())
    assert not any("AKIA" in p.name for p in tmp_path.rglob("*"))
    assert "AKIA" not in (config.mirror / "_governance.toml").read_text()


def test_labels_that_cannot_be_read_give_the_most_sensitive_level(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    site(graph)
    graph.locked.add("d1")  # 423: an encrypted file whose labels Graph cannot extract
    config = config_for(tmp_path, server)
    sync(config, Settings())
    assert levels(config.mirror)["policies/Public/faq.md"] == "restricted"
    graph.locked.clear()
    sync(config, Settings())  # asked again, though the file did not change
    assert levels(config.mirror)["policies/Public/faq.md"] == "public"


def test_front_matter_below_the_label_is_refused(tmp_path: Path, drive: Drive) -> None:
    graph, server = drive
    body = b"---\nclassification: public\n---\n# Pay\n\npay bands\n"
    graph.add("p1", "pay.md", "root", "file", body, [RESTRICTED_LABEL])
    graph.add("p2", "ok.md", "root", "file", b"---\nclassification: restricted\n---\n# Ok\n\nok\n", [PUBLIC_LABEL])
    config = config_for(tmp_path, server)
    report = sync(config, Settings())
    assert levels(config.mirror) == {"policies/ok.md": "public"}
    assert "below restricted" in dict(report.sources[0].skipped)["policies/pay.md"]


@pytest.mark.heavy  # 10,000 label requests: about a minute on a busy machine
def test_ten_thousand_items_in_pages(tmp_path: Path, drive: Drive) -> None:
    from governed_evidence.connectors.graph import GraphDrive as Source
    from governed_evidence.connectors.http import Http

    graph, server = drive
    graph.add("big", "Big", "root", "folder")
    for n in range(10_000):
        graph.add(f"i{n}", f"doc-{n}.md", "big", "file", b"x", [PUBLIC_LABEL if n % 2 else INTERNAL_LABEL])
    config = config_for(tmp_path, server)
    http = Http(timeout=10, deadline_seconds=600)
    try:
        listing = Source(config.sources[0], http).listing(None)  # type: ignore[arg-type]
    finally:
        http.close()
    assert len(listing.files) == 10_000 and listing.full
    assert graph.delta_requests == 51  # 10,002 items, 200 a page
    assert sum(f.level.label == "public" for f in listing.files) == 5_000
