"""SharePoint and OneDrive through Microsoft Graph: app-only access to one drive, its delta feed, its labels.

The flow follows Graph's documentation:

- A token from the Microsoft identity platform's token endpoint with the client credentials
  grant (``scope=https://graph.microsoft.com/.default``), so the app's permission is whatever
  the tenant granted it: ``Sites.Selected`` with one site is the least.
- ``GET /drives/{id}/root/delta`` (or ``/sites/{id}/drive/root/delta``), following each
  ``@odata.nextLink`` until an ``@odata.deltaLink``, which is kept: the next sync asks it for
  the changes since. Items are tracked by id, as Graph says to (its delta answers carry no
  ``parentReference.path``, and renaming a folder does not list its descendants): the folder
  tree is kept in the source's state and every file's path is rebuilt from it, so a renamed
  or moved folder moves everything under it. An item with the ``deleted`` facet is removed.
- ``410 Gone`` on a delta link that expired: a full enumeration from its ``Location`` (or from
  the start), after which anything not listed is gone.
- ``POST /drives/{id}/items/{item}/extractSensitivityLabels``, whose
  ``extractSensitivityLabelsResult`` lists the item's ``sensitivityLabelId``s; each is mapped by
  the configuration. A file whose labels cannot be read (``423 Locked`` for an encrypted file,
  any other refusal) is treated as unlabelled: the most sensitive level.
- ``GET /drives/{id}/items/{item}/content`` answers ``302`` with a pre-authenticated download
  URL; it is fetched without the Authorization header (the token must not go to another host).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO
from urllib.parse import quote, urljoin

import httpx

from governed_evidence.connectors.config import GraphSource, secret_from_env
from governed_evidence.connectors.http import Http
from governed_evidence.connectors.mirror import Listing, RemoteFile
from governed_evidence.errors import ConnectorError

__all__ = ["LABEL_REQUESTS", "MAX_DEPTH", "MAX_PAGES", "GraphDrive"]

#: Pages of one delta enumeration at most (Graph pages hold up to a few hundred items each).
MAX_PAGES = 100_000
#: Label requests in flight at once (Graph throttles an app that sends many more).
LABEL_REQUESTS = 4
#: Folder depth at most (SharePoint allows far less): a parent loop cannot spin a sync.
MAX_DEPTH = 256


class GraphDrive:
    def __init__(self, config: GraphSource, http: Http) -> None:
        self.name = config.name
        self._config = config
        self._http = http
        self._token: str | None = None
        self._lock = threading.Lock()
        if config.drive_id:
            self._base = f"{config.graph_url}/drives/{quote(config.drive_id, safe='')}"
        else:
            self._base = f"{config.graph_url}/sites/{quote(config.site_id or '', safe=',')}/drive"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    def _auth(self) -> dict[str, str]:
        with self._lock:
            return self._auth_locked()

    def _auth_locked(self) -> dict[str, str]:
        if self._token is None:
            c = self._config
            body = self._http.json(
                "POST",
                f"{c.login_url}/{quote(c.tenant_id, safe='')}/oauth2/v2.0/token",
                data={
                    "client_id": c.client_id,
                    "client_secret": secret_from_env(c.client_secret_env, c.name),
                    "scope": "https://graph.microsoft.com/.default",
                    "grant_type": "client_credentials",
                },
            )
            token = body.get("access_token")
            if not isinstance(token, str) or not token:
                raise ConnectorError(f"source {c.name!a}: the token endpoint gave no access_token")
            self._token = token
        return self._headers()

    def _authed(self, method: str, url: str, ok: frozenset[int] = frozenset({200})) -> httpx.Response:
        """A Graph request with the token; a token that expired during a long sync is replaced once."""
        used = self._auth()
        response = self._http.request(method, url, headers=used, ok=ok | {401})
        if response.status_code == 401:
            with self._lock:
                # Label requests run side by side: only the first to see the old token refused drops it.
                if used == self._headers():
                    self._token = None
            response = self._http.request(method, url, headers=self._auth(), ok=ok)
        return response

    def _page(self, url: str) -> tuple[dict[str, Any] | None, str | None]:
        """A delta page, or (None, where a full enumeration starts) when the delta link expired."""
        response = self._authed("GET", url, ok=frozenset({200, 410}))
        if response.status_code == 410:
            location = response.headers.get("Location")
            return None, urljoin(url, location) if location else None
        try:
            body = response.json()
        except ValueError:
            raise ConnectorError(f"source {self.name!a}: a delta page is not JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("value"), list):
            raise ConnectorError(f"source {self.name!a}: a delta page has no value list")
        return body, None

    def _labels(self, item_id: str) -> list[str] | None:
        """The item's sensitivity label ids; None when Graph cannot say (then the most sensitive level)."""
        url = f"{self._base}/items/{quote(item_id, safe='')}/extractSensitivityLabels"
        try:
            body = self._authed("POST", url).json()
        except (ConnectorError, ValueError):
            return None
        result = body.get("value", body) if isinstance(body, dict) else None
        labels = result.get("labels") if isinstance(result, dict) else None
        if not isinstance(labels, list):
            return None
        ids = [label.get("sensitivityLabelId") for label in labels if isinstance(label, dict)]
        return sorted({i for i in ids if isinstance(i, str) and i})

    def listing(self, state: dict[str, Any] | None) -> Listing:
        start = f"{self._base}/root/delta"
        items: dict[str, dict[str, Any]] = dict(state.get("items", {})) if state else {}
        url: str | None = state.get("delta_link") if state else None
        full = url is None
        if full:
            items = {}
        url = url or start
        seen: set[str] = set()
        delta_link: str | None = None
        for _ in range(MAX_PAGES):
            body, restart = self._page(url)
            if body is None:
                if full:
                    raise ConnectorError(f"source {self.name!a}: the delta enumeration expired while it ran")
                # The delta link expired: enumerate everything again; what it does not list is gone.
                full, items, seen = True, {}, set()
                url = restart or start
                continue
            for item in body["value"]:
                if isinstance(item, dict) and isinstance(item.get("id"), str):
                    self._apply(items, item)
                    seen.add(item["id"])
            next_link, delta_link = body.get("@odata.nextLink"), body.get("@odata.deltaLink")
            if isinstance(next_link, str):
                url = next_link
                continue
            if isinstance(delta_link, str):
                break
            raise ConnectorError(f"source {self.name!a}: a delta page has neither a nextLink nor a deltaLink")
        else:
            raise ConnectorError(f"source {self.name!a}: more than {MAX_PAGES} delta pages")
        # Labels of every file the delta listed, and again of those whose labels could not be read
        # last time; a few requests at once, as each is mostly waiting on Graph.
        wanted = sorted(
            item_id
            for item_id, item in items.items()
            if item["kind"] == "file" and (item_id in seen or item.get("labels") is None)
        )
        self._auth()  # the token once, before the requests that share it
        with ThreadPoolExecutor(max_workers=LABEL_REQUESTS) as pool:
            for item_id, labels in zip(wanted, pool.map(self._labels, wanted), strict=True):
                items[item_id]["labels"] = labels
        skipped: list[tuple[str, str]] = []
        files = self._files(items, skipped)
        return Listing(files, {"delta_link": delta_link, "items": items}, full=full, skipped=skipped)

    @staticmethod
    def _apply(items: dict[str, dict[str, Any]], item: dict[str, Any]) -> None:
        item_id = item["id"]
        if "deleted" in item:
            items.pop(item_id, None)
            return
        parent = item.get("parentReference", {}).get("id") if isinstance(item.get("parentReference"), dict) else None
        if "root" in item:
            items[item_id] = {"kind": "root"}
        elif "folder" in item:
            items[item_id] = {"kind": "folder", "name": item.get("name"), "parent": parent}
        elif "file" in item:
            hashes = item["file"].get("hashes", {}) if isinstance(item["file"], dict) else {}
            version = hashes.get("quickXorHash") or hashes.get("sha256Hash") or item.get("cTag") or item.get("eTag")
            items[item_id] = {
                "kind": "file",
                "name": item.get("name"),
                "parent": parent,
                "version": str(version or ""),
                "link": item.get("webUrl") if isinstance(item.get("webUrl"), str) else None,
                "size": item.get("size") if isinstance(item.get("size"), int) else None,
                "labels": None,
            }
        else:
            # Packages (OneNote notebooks) and anything else with no file content: nothing to mirror.
            items.pop(item_id, None)

    def _path(self, items: dict[str, dict[str, Any]], item: dict[str, Any]) -> tuple[str, ...] | None:
        parts = [str(item.get("name") or "")]
        parent = item.get("parent")
        for _ in range(MAX_DEPTH):
            folder = items.get(parent) if isinstance(parent, str) else None
            if folder is None:
                return None
            if folder["kind"] == "root":
                return tuple(reversed(parts))
            parts.append(str(folder.get("name") or ""))
            parent = folder.get("parent")
        return None

    def _files(self, items: dict[str, dict[str, Any]], skipped: list[tuple[str, str]]) -> list[RemoteFile]:
        files: list[RemoteFile] = []
        for item_id, item in items.items():
            if item["kind"] != "file":
                continue
            parts = self._path(items, item)
            if parts is None:
                skipped.append((f"item {item_id}", "its folders are not known (a parent outside what the app may see)"))
                continue
            labels = item.get("labels") or []
            level, label = self._config.level_of(labels)
            files.append(
                RemoteFile(
                    id=item_id,
                    parts=parts,
                    version=item["version"],
                    level=level,
                    label=label,
                    link=item.get("link"),
                    size=item.get("size"),
                    fetch={"item": item_id},
                )
            )
        return files

    def download(self, file: RemoteFile, out: BinaryIO, limit: int) -> None:
        url = f"{self._base}/items/{quote(file.fetch['item'], safe='')}/content"
        response = self._authed("GET", url, ok=frozenset({200, 302}))
        if response.status_code == 200:
            if len(response.content) > limit:
                raise ConnectorError(f"larger than {limit} bytes")
            out.write(response.content)
            return
        location = response.headers.get("Location")
        if not location:
            raise ConnectorError("the content request gave no download URL")
        # Pre-authenticated: the URL is the credential, so the bearer token is not sent there.
        self._http.download(urljoin(url, location), out, limit)
