"""Fixtures for the connector tests: a Graph drive on 127.0.0.1 and a configuration naming it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.connectors.config import ConnectorConfig, load_config
from tests.connectors.graph_server import CLIENT_ID, DRIVE, TENANT, GraphDrive, Server, start

#: Not a real secret: the token endpoint of the test server accepts it, and every test that
#: looks for leaks looks for this string.
SECRET = "Qx7~test-client-secret-4f9a0c2e71"
SECRET_ENV = "TEST_GRAPH_CLIENT_SECRET"
#: Three Purview label ids, as a tenant's labels are named in Graph (GUIDs).
PUBLIC_LABEL = "5feba255-812e-446a-ac59-a7044ef827b5"
INTERNAL_LABEL = "fa781fdf-68c8-43ec-ae08-c4813deb2144"
RESTRICTED_LABEL = "3937098d-df0c-4c8d-8f66-5876b57b75ba"
UNKNOWN_LABEL = "00000000-dead-beef-0000-000000000000"


@pytest.fixture
def drive(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[GraphDrive, Server]]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    graph = GraphDrive(SECRET)
    server, thread = start(graph)
    yield graph, server
    server.shutdown()
    server.server_close()
    thread.join(5)


def write_config(
    tmp_path: Path, server: Server, *, extra: str = "", name: str = "config.toml", timeout: float = 5
) -> Path:
    path = tmp_path / name
    path.write_text(
        f"""
mirror = "mirror"
index = "evidence.sqlite"

[[source]]
name = "policies"
kind = "sharepoint"
tenant_id = "{TENANT}"
client_id = "{CLIENT_ID}"
client_secret_env = "{SECRET_ENV}"
drive_id = "{DRIVE}"
graph_url = "{server.url}/v1.0"
login_url = "{server.url}/login"
timeout_seconds = {timeout}
{extra}

[source.labels]
"{PUBLIC_LABEL}" = "public"
"{INTERNAL_LABEL}" = "internal"
"{RESTRICTED_LABEL}" = "restricted"
""",
        encoding="utf-8",
    )
    return path


def config_for(tmp_path: Path, server: Server, **kwargs: Any) -> ConnectorConfig:
    return load_config(write_config(tmp_path, server, **kwargs))


def text(title: str, words: str) -> bytes:
    return f"# {title}\n\n{words}\n".encode()
