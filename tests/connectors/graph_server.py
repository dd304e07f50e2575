"""A Microsoft Graph drive on 127.0.0.1 for the connector's tests.

Written from Graph's published documentation, not from a tenant's traffic:
``driveItem: delta`` (pages of driveItems with ``@odata.nextLink``, the last with
``@odata.deltaLink``; no ``parentReference.path`` in delta answers; deleted items returned
with the ``deleted`` facet and without their name; ``410 Gone`` with a ``Location`` to start
again when a token expired), the ``driveItem`` resource and its facets (``file`` with
``hashes.quickXorHash``, ``folder`` with ``childCount``, ``root``, ``parentReference.id``,
``webUrl``, ``eTag``/``cTag``), ``driveItem: extractSensitivityLabels`` (an
``extractSensitivityLabelsResult`` under ``value`` listing ``sensitivityLabelId``,
``assignmentMethod`` and ``tenantId``; ``423`` for a file whose labels cannot be extracted),
``GET /items/{id}/content`` answering ``302`` to a pre-authenticated download URL, the
identity platform's client credentials token endpoint, and throttling (``429`` with
``Retry-After``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

TENANT = "11111111-2222-3333-4444-555555555555"
CLIENT_ID = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
DRIVE = "b!drive-policies"
PAGE = 200


@dataclass
class Item:
    id: str
    name: str
    parent: str | None
    kind: str  # root, folder, file
    content: bytes = b""
    labels: list[str] = field(default_factory=list)
    version: int = 1
    changed: int = 0
    deleted: bool = False


class GraphDrive:
    """The drive's items, a change counter (the delta tokens) and the faults a test turns on."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.lock = threading.Lock()
        self.seq = 0
        self.items: dict[str, Item] = {}
        self.expired_before = 0  # delta tokens below this answer 410
        self.throttle = 0  # this many Graph requests answer 429 first
        self.retry_after = "0"
        self.delay = 0.0  # seconds before every answer
        self.truncate: set[str] = set()  # item ids whose download stops half way
        self.locked: set[str] = set()  # item ids whose labels answer 423
        self.downloads: list[str] = []
        self.download_auth: list[str] = []  # Authorization headers seen on download URLs (must stay empty)
        self.delta_requests = 0
        self.tokens: set[str] = set()
        self.expire_tokens = False  # every token expires after the next delta page
        self.requests: list[str] = []
        self.add("root", "root", None, "root")

    def _touch(self, item: Item) -> None:
        self.seq += 1
        item.changed = self.seq

    def add(
        self,
        item_id: str,
        name: str,
        parent: str | None,
        kind: str,
        content: bytes = b"",
        labels: list[str] | None = None,
    ) -> None:
        with self.lock:
            item = Item(item_id, name, parent, kind, content, list(labels or []))
            self.items[item_id] = item
            self._touch(item)

    def change(self, item_id: str, **values: Any) -> None:
        """Rename (name), move (parent), relabel (labels), edit (content) or delete (deleted=True)."""
        with self.lock:
            item = self.items[item_id]
            for key, value in values.items():
                setattr(item, key, value)
            item.version += 1
            self._touch(item)

    def path(self, item: Item) -> str:
        parts: list[str] = []
        while item.kind != "root":
            parts.append(item.name)
            item = self.items[item.parent or "root"]
        return "/".join(reversed(parts))

    def resource(self, item: Item) -> dict[str, Any]:
        if item.deleted:
            # OneDrive for Business omits the name (and cTag) of a deleted item.
            return {"id": item.id, "deleted": {"state": "deleted"}, "parentReference": {"driveId": DRIVE}}
        out: dict[str, Any] = {
            "id": item.id,
            "name": item.name,
            "eTag": f'"{{{item.id}}},{item.version}"',
            "lastModifiedDateTime": "2026-01-05T10:00:00Z",
            "webUrl": "https://contoso.sharepoint.com/sites/policies/Shared%20Documents/" + quote(self.path(item)),
            "parentReference": {"driveId": DRIVE, "driveType": "documentLibrary"},
        }
        if item.parent:
            out["parentReference"]["id"] = item.parent
        if item.kind == "root":
            out["root"] = {}
            out["folder"] = {"childCount": 0}
        elif item.kind == "folder":
            out["folder"] = {"childCount": sum(1 for i in self.items.values() if i.parent == item.id and not i.deleted)}
        else:
            digest = base64.b64encode(hashlib.sha1(item.content).digest()).decode()  # stands in for quickXorHash
            out["file"] = {"mimeType": "application/octet-stream", "hashes": {"quickXorHash": digest}}
            out["size"] = len(item.content)
        return out

    def depth(self, item: Item) -> int:
        d = 0
        while item.parent and item.parent in self.items:
            item = self.items[item.parent]
            d += 1
        return d

    def delta(self, token: int | None, skip: int) -> tuple[list[dict[str, Any]], int]:
        with self.lock:
            if token is None:
                chosen = [i for i in self.items.values() if not i.deleted]
                chosen.sort(key=lambda i: (self.depth(i), i.id))
            else:
                chosen = sorted((i for i in self.items.values() if i.changed > token), key=lambda i: i.changed)
            return [self.resource(i) for i in chosen[skip : skip + PAGE]], len(chosen)


class Handler(BaseHTTPRequestHandler):
    server: Server
    # Keep-alive, as Graph's front ends do: a sync reuses its connections.
    protocol_version = "HTTP/1.1"
    # Headers and body in one write, without Nagle's delay on a kept-alive connection.
    disable_nagle_algorithm = True
    wbufsize = -1

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: object = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        header = self.headers.get("Authorization", "")
        return header.startswith("Bearer ") and header[7:] in self.server.drive.tokens

    def do_POST(self) -> None:
        drive = self.server.drive
        time.sleep(drive.delay)
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        drive.requests.append(f"POST {url.path}")
        if url.path == f"/login/{TENANT}/oauth2/v2.0/token":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            if form.get("grant_type") != "client_credentials" or form.get("client_id") != CLIENT_ID:
                return self._send(400, {"error": "unsupported_grant_type"})
            if form.get("client_secret") != drive.secret or form.get("scope") != "https://graph.microsoft.com/.default":
                return self._send(401, {"error": "invalid_client"})
            token = secrets.token_urlsafe(16)
            drive.tokens.add(token)
            return self._send(200, {"token_type": "Bearer", "expires_in": 3599, "access_token": token})
        if not self._authorised():
            return self._send(401, {"error": {"code": "InvalidAuthenticationToken"}})
        prefix = f"/v1.0/drives/{quote(DRIVE, safe='')}/items/"
        if url.path.startswith(prefix) and url.path.endswith("/extractSensitivityLabels"):
            item_id = url.path[len(prefix) : -len("/extractSensitivityLabels")]
            if item_id in drive.locked:
                return self._send(423, {"error": {"code": "fileDoubleKeyEncrypted", "message": "locked"}})
            item = drive.items.get(item_id)
            if item is None or item.deleted:
                return self._send(404, {"error": {"code": "itemNotFound"}})
            labels = [
                {"sensitivityLabelId": label, "assignmentMethod": "standard", "tenantId": TENANT}
                for label in item.labels
            ]
            return self._send(
                200, {"value": {"@odata.type": "microsoft.graph.extractSensitivityLabelsResult", "labels": labels}}
            )
        self._send(404, {"error": {"code": "itemNotFound"}})

    def do_GET(self) -> None:
        drive = self.server.drive
        time.sleep(drive.delay)
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        drive.requests.append(f"GET {url.path}")
        if url.path.startswith("/download/"):
            item_id = url.path[len("/download/") :]
            if self.headers.get("Authorization"):
                drive.download_auth.append(self.headers["Authorization"])
            item = drive.items.get(item_id)
            if item is None or query.get("tempauth") != "pre-authenticated":
                return self._send(401)
            drive.downloads.append(item_id)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(item.content)))
            self.end_headers()
            if item_id in drive.truncate:
                self.wfile.write(item.content[: len(item.content) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(item.content)
            return
        if drive.throttle > 0:
            drive.throttle -= 1
            return self._send(429, {"error": {"code": "activityLimitReached"}}, {"Retry-After": drive.retry_after})
        if not self._authorised():
            return self._send(401, {"error": {"code": "InvalidAuthenticationToken"}})
        base = f"/v1.0/drives/{quote(DRIVE, safe='')}"
        if url.path == f"{base}/root/delta":
            drive.delta_requests += 1
            token = int(query["token"]) if "token" in query else None
            if token is not None and token < drive.expired_before:
                return self._send(
                    410,
                    {"error": {"code": "resyncRequired", "message": "Resync required"}},
                    {"Location": f"{self.server.url}{base}/root/delta"},
                )
            skip = int(query.get("skip", "0"))
            page, total = drive.delta(token, skip)
            if drive.expire_tokens:
                drive.expire_tokens = False
                drive.tokens.clear()  # the token runs out here, in the middle of the sync
            body: dict[str, Any] = {"value": page}
            if skip + PAGE < total:
                since = "" if token is None else f"token={token}&"
                body["@odata.nextLink"] = f"{self.server.url}{base}/root/delta?{since}skip={skip + PAGE}"
            else:
                body["@odata.deltaLink"] = f"{self.server.url}{base}/root/delta?token={drive.seq}"
            return self._send(200, body)
        if url.path.startswith(f"{base}/items/") and url.path.endswith("/content"):
            item_id = url.path[len(f"{base}/items/") : -len("/content")]
            if item_id not in drive.items:
                return self._send(404, {"error": {"code": "itemNotFound"}})
            return self._send(
                302, None, {"Location": f"{self.server.url}/download/{item_id}?tempauth=pre-authenticated"}
            )
        self._send(404, {"error": {"code": "itemNotFound"}})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, drive: GraphDrive) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.drive = drive
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


def start(drive: GraphDrive) -> tuple[Server, threading.Thread]:
    server = Server(drive)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread
