"""A Google Drive (API v3) on 127.0.0.1 for the connector's tests.

Written from Drive's published documentation, not from recorded traffic: the OAuth 2.0 token
endpoint's JWT bearer grant for service accounts (an RS256-signed assertion with ``iss``,
``scope``, ``aud``, ``iat``, ``exp``, checked here against the account's public key),
``changes.getStartPageToken``, ``files.list`` and ``changes.list`` (``nextPageToken``, and
``newStartPageToken`` on the last page of changes; a change with ``removed`` and ``fileId``),
the ``files`` resource (``parents``, ``mimeType``, ``md5Checksum`` for binary files only,
``version``, ``webViewLink``, ``trashed``, ``labelInfo.labels`` with selection fields, returned
only for the labels ``includeLabels`` names), ``files.get?alt=media`` (refused for Google
Docs types) and ``files.export`` for Docs, Sheets and Slides.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

ACCOUNT = "policies-sync@example-project.iam.gserviceaccount.com"
SHARED_DRIVE = "0AFxSharedDrive"
FOLDER = "application/vnd.google-apps.folder"
DOC = "application/vnd.google-apps.document"
SHEET = "application/vnd.google-apps.spreadsheet"
SLIDES = "application/vnd.google-apps.presentation"
FORM = "application/vnd.google-apps.form"
_EXPORTS = {
    DOC: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    SHEET: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    SLIDES: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}


@dataclass
class File:
    id: str
    name: str
    mime: str
    parent: str
    content: bytes = b""
    labels: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # label id -> field id -> choices
    version: int = 1
    changed: int = 0
    trashed: bool = False
    removed: bool = False  # deleted for good: listed by changes as removed, without a file


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Drive:
    def __init__(self, key: rsa.RSAPrivateKey) -> None:
        self.public_key = key.public_key()
        self.lock = threading.Lock()
        self.seq = 0
        self.files: dict[str, File] = {}
        self.tokens: set[str] = set()
        self.downloads: list[str] = []
        self.exports: list[tuple[str, str]] = []
        self.page = 2  # files a page: small, so paging is exercised

    def add(self, file_id: str, name: str, mime: str, parent: str, content: bytes = b"", **labels: Any) -> None:
        with self.lock:
            self.seq += 1
            self.files[file_id] = File(file_id, name, mime, parent, content, dict(labels), changed=self.seq)

    def change(self, file_id: str, **values: Any) -> None:
        with self.lock:
            file = self.files[file_id]
            for key, value in values.items():
                setattr(file, key, value)
            self.seq += 1
            file.version += 1
            file.changed = self.seq

    def resource(self, file: File, include: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "drive#file",
            "id": file.id,
            "name": file.name,
            "mimeType": file.mime,
            "parents": [file.parent],
            "version": str(file.version),
            "webViewLink": f"https://docs.google.com/document/d/{file.id}/edit",
            "trashed": file.trashed,
        }
        if not file.mime.startswith("application/vnd.google-apps."):
            out["md5Checksum"] = hashlib.md5(file.content).hexdigest()
            out["size"] = str(len(file.content))
        labels = [
            {
                "kind": "drive#label",
                "id": label,
                "revisionId": "1",
                "fields": {
                    field_id: {
                        "kind": "drive#labelField",
                        "id": field_id,
                        "valueType": "selection",
                        "selection": choices,
                    }
                    for field_id, choices in fields.items()
                },
            }
            for label, fields in file.labels.items()
            if label in include
        ]
        out["labelInfo"] = {"labels": labels}
        return out

    def check_assertion(self, assertion: str, audience: str) -> bool:
        header, claims, signature = assertion.split(".")
        try:
            self.public_key.verify(
                _unb64(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except Exception:
            return False
        body = json.loads(_unb64(claims))
        return (
            json.loads(_unb64(header)) == {"alg": "RS256", "typ": "JWT"}
            and body["iss"] == ACCOUNT
            and body["aud"] == audience
            and body["scope"] == "https://www.googleapis.com/auth/drive.readonly"
            and body["exp"] - body["iat"] <= 3600
        )


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = -1

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: object = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        drive = self.server.drive
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
        if urlsplit(self.path).path != "/token":
            return self._send(404)
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return self._send(400, {"error": "unsupported_grant_type"})
        if not drive.check_assertion(form.get("assertion", ""), f"{self.server.url}/token"):
            return self._send(400, {"error": "invalid_grant"})
        token = secrets.token_urlsafe(16)
        drive.tokens.add(token)
        self._send(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def do_GET(self) -> None:
        drive = self.server.drive
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        header = self.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or header[7:] not in drive.tokens:
            return self._send(401, {"error": {"code": 401, "message": "Invalid Credentials"}})
        include = set(query.get("includeLabels", "").split(",")) - {""}
        path = url.path.removeprefix("/drive/v3")
        if path == "/changes/startPageToken":
            return self._send(200, {"kind": "drive#startPageToken", "startPageToken": str(drive.seq)})
        if path == "/files" and "alt" not in query:
            live = sorted((f for f in drive.files.values() if not (f.trashed or f.removed)), key=lambda f: f.id)
            start = int(query.get("pageToken", "0"))
            body: dict[str, Any] = {
                "kind": "drive#fileList",
                "files": [drive.resource(f, include) for f in live[start : start + drive.page]],
            }
            if start + drive.page < len(live):
                body["nextPageToken"] = str(start + drive.page)
            return self._send(200, body)
        if path == "/changes":
            token, _, skip = query["pageToken"].partition(":")
            since = sorted((f for f in drive.files.values() if f.changed > int(token)), key=lambda f: f.changed)
            offset = int(skip or 0)
            changes = [
                {"kind": "drive#change", "changeType": "file", "fileId": f.id, "removed": True}
                if f.removed
                else {
                    "kind": "drive#change",
                    "changeType": "file",
                    "fileId": f.id,
                    "removed": False,
                    "file": drive.resource(f, include),
                }
                for f in since[offset : offset + drive.page]
            ]
            body = {"kind": "drive#changeList", "changes": changes}
            if offset + drive.page < len(since):
                body["nextPageToken"] = f"{token}:{offset + drive.page}"
            else:
                body["newStartPageToken"] = str(drive.seq)
            return self._send(200, body)
        if path.startswith("/files/"):
            rest = path[len("/files/") :]
            file_id, _, action = rest.partition("/")
            file = drive.files.get(unquote(file_id))
            if file is None or file.trashed or file.removed:
                return self._send(404, {"error": {"code": 404, "message": "File not found"}})
            if action == "export":
                if _EXPORTS.get(file.mime) != query.get("mimeType"):
                    return self._send(400, {"error": {"code": 400, "message": "badRequest"}})
                drive.exports.append((file.id, query["mimeType"]))
                return self._send(200, raw=file.content)
            if query.get("alt") == "media":
                if file.mime.startswith("application/vnd.google-apps."):
                    return self._send(403, {"error": {"code": 403, "message": "fileNotDownloadable"}})
                drive.downloads.append(file.id)
                return self._send(200, raw=file.content)
        self._send(404, {"error": {"code": 404, "message": "Not found"}})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, drive: Drive) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.drive = drive
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


def start(drive: Drive) -> tuple[Server, threading.Thread]:
    server = Server(drive)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread
