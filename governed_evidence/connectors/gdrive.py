"""Google Drive (API v3) through a service account: the changes feed, exports, labels and folder rules.

The flow follows Drive's documentation:

- A token from Google's OAuth 2.0 token endpoint with the JWT bearer grant
  (``urn:ietf:params:oauth:grant-type:jwt-bearer``): a JWT whose claims name the service
  account (``iss``), the read-only Drive scope and the token endpoint (``aud``), signed RS256
  with the account's private key, read from the environment variable the configuration names
  (the key's PEM, or the service account's whole JSON key file).
- The first sync lists every file (``files.list``, paged by ``nextPageToken``) after asking
  ``changes.getStartPageToken``; later syncs read ``changes.list`` from the saved page token
  until a page gives ``newStartPageToken``, which is saved. Files are tracked by id with their
  ``parents``, so a moved or renamed folder moves everything under it.
- Google Docs, Sheets and Slides are exported (``files.export``) to DOCX, XLSX and PPTX; other
  Google types (forms, drawings, shortcuts...) have no export ingest reads and are skipped with
  the reason; other files are downloaded with ``alt=media``.
- A file's level comes from its Drive labels (``includeLabels``, ``labelInfo.labels``) mapped by
  the configuration (a key ``LABEL_ID`` for the label whatever its fields, or
  ``LABEL_ID/FIELD_ID=CHOICE_ID`` for one selection), and from the configuration's folder rules
  (the longest folder path that contains it); both apply and the more sensitive wins. Neither:
  the most sensitive level.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any, BinaryIO
from urllib.parse import quote, urlencode

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from governed_evidence.config import Classification
from governed_evidence.connectors.config import DriveSource, secret_from_env
from governed_evidence.connectors.http import Http
from governed_evidence.connectors.mirror import Listing, RemoteFile
from governed_evidence.errors import ConfigError, ConnectorError

__all__ = ["EXPORTS", "FOLDER", "MAX_DEPTH", "MAX_PAGES", "SCOPE", "GoogleDrive", "assertion"]

SCOPE = "https://www.googleapis.com/auth/drive.readonly"
FOLDER = "application/vnd.google-apps.folder"
#: Google type -> (export MIME type, suffix): the Office formats ingest reads.
EXPORTS = {
    "application/vnd.google-apps.document": (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ".docx",
    ),
    "application/vnd.google-apps.spreadsheet": (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ".xlsx",
    ),
    "application/vnd.google-apps.presentation": (
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        ".pptx",
    ),
}
_FIELDS = "id,name,mimeType,parents,md5Checksum,version,webViewLink,size,trashed,labelInfo"
MAX_PAGES = 100_000
MAX_DEPTH = 256


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _private_key(text: str, source: str, variable: str) -> rsa.RSAPrivateKey:
    """The RSA key from a PEM or a service account JSON key file; errors never show the key."""
    pem = text
    if text.lstrip().startswith("{"):
        try:
            pem = json.loads(text)["private_key"]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"source {source!a}: {variable} holds JSON without a private_key") from None
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"source {source!a}: {variable} does not hold a PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ConfigError(f"source {source!a}: {variable} must hold an RSA key (RS256)")
    return key


def assertion(email: str, audience: str, key: rsa.RSAPrivateKey, now: float) -> str:
    """The signed JWT of the bearer grant (RFC 7523), as Google's service accounts sign it."""
    header = _b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    claims = {"iss": email, "scope": SCOPE, "aud": audience, "iat": int(now), "exp": int(now) + 3600}
    signing_input = f"{header}.{_b64(json.dumps(claims).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


class GoogleDrive:
    def __init__(self, config: DriveSource, http: Http) -> None:
        self.name = config.name
        self._config = config
        self._http = http
        self._token: str | None = None
        self._root = config.folder_id or config.drive_id
        if self._root is None:
            raise ConfigError(f"source {config.name!a}: give drive_id (a shared drive) or folder_id")

    def _auth(self) -> dict[str, str]:
        if self._token is None:
            c = self._config
            key = _private_key(secret_from_env(c.private_key_env, c.name), c.name, c.private_key_env)
            body = self._http.json(
                "POST",
                c.token_url,
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                    "assertion": assertion(c.service_account_email, c.token_url, key, time.time()),
                },
            )
            token = body.get("access_token")
            if not isinstance(token, str) or not token:
                raise ConnectorError(f"source {c.name!a}: the token endpoint gave no access_token")
            self._token = token
        return {"Authorization": f"Bearer {self._token}"}

    def _query(self, **params: str) -> str:
        common = {"supportsAllDrives": "true", "includeItemsFromAllDrives": "true"}
        if self._config.drive_id:
            common |= {"corpora": "drive", "driveId": self._config.drive_id}
        label_ids = sorted({key.split("/", 1)[0] for key in self._config.labels})
        if label_ids:
            common["includeLabels"] = ",".join(label_ids)
        return urlencode(common | params)

    def _get(self, path: str, **params: str) -> dict[str, Any]:
        return self._http.json("GET", f"{self._config.drive_url}/{path}?{self._query(**params)}", headers=self._auth())

    def listing(self, state: dict[str, Any] | None) -> Listing:
        items: dict[str, dict[str, Any]] = dict(state.get("items", {})) if state else {}
        token = state.get("page_token") if state else None
        if token is None:
            return self._full()
        for _ in range(MAX_PAGES):
            try:
                page = self._get(
                    "changes",
                    pageToken=token,
                    includeRemoved="true",
                    fields=f"nextPageToken,newStartPageToken,changes(fileId,removed,file({_FIELDS}))",
                )
            except ConnectorError as exc:
                if "HTTP 410" in str(exc) or "HTTP 404" in str(exc):
                    return self._full()  # the saved page token is no longer valid: start again
                raise
            for change in page.get("changes", []):
                file_id = change.get("fileId")
                if not isinstance(file_id, str):
                    continue
                file = change.get("file")
                if change.get("removed") or not isinstance(file, dict) or file.get("trashed"):
                    items.pop(file_id, None)
                else:
                    items[file_id] = self._item(file)
            if isinstance(page.get("newStartPageToken"), str):
                return self._listing(items, page["newStartPageToken"], full=False)
            token = page.get("nextPageToken")
            if not isinstance(token, str):
                raise ConnectorError(f"source {self.name!a}: a changes page has neither token")
        raise ConnectorError(f"source {self.name!a}: more than {MAX_PAGES} changes pages")

    def _full(self) -> Listing:
        start = self._get("changes/startPageToken").get("startPageToken")
        if not isinstance(start, str):
            raise ConnectorError(f"source {self.name!a}: no startPageToken")
        items: dict[str, dict[str, Any]] = {}
        params = {"q": "trashed = false", "pageSize": "1000", "fields": f"nextPageToken,files({_FIELDS})"}
        for _ in range(MAX_PAGES):
            page = self._get("files", **params)
            for file in page.get("files", []):
                if isinstance(file, dict) and isinstance(file.get("id"), str):
                    items[file["id"]] = self._item(file)
            next_token = page.get("nextPageToken")
            if not isinstance(next_token, str):
                return self._listing(items, start, full=True)
            params["pageToken"] = next_token
        raise ConnectorError(f"source {self.name!a}: more than {MAX_PAGES} file pages")

    def _listing(self, items: dict[str, dict[str, Any]], token: str, *, full: bool) -> Listing:
        skipped: list[tuple[str, str]] = []
        files = self._files(items, skipped)
        return Listing(files, {"page_token": token, "items": items}, full=full, skipped=skipped)

    @staticmethod
    def _labels(file: dict[str, Any]) -> list[str]:
        """Each Drive label as mapping keys: ``LABEL`` and ``LABEL/FIELD=CHOICE`` per selected choice."""
        keys: list[str] = []
        info = file.get("labelInfo")
        for label in info.get("labels", []) if isinstance(info, dict) else []:
            if not isinstance(label, dict) or not isinstance(label.get("id"), str):
                continue
            keys.append(label["id"])
            fields = label.get("fields")
            for field_id, value in fields.items() if isinstance(fields, dict) else []:
                for choice in value.get("selection", []) if isinstance(value, dict) else []:
                    keys.append(f"{label['id']}/{field_id}={choice}")
        return keys

    def _item(self, file: dict[str, Any]) -> dict[str, Any]:
        parents = file.get("parents")
        return {
            "name": str(file.get("name") or ""),
            "mime": str(file.get("mimeType") or ""),
            "parent": parents[0] if isinstance(parents, list) and parents else None,
            "version": str(file.get("md5Checksum") or file.get("version") or ""),
            "link": file.get("webViewLink") if isinstance(file.get("webViewLink"), str) else None,
            "labels": self._labels(file),
        }

    def _path(self, items: dict[str, dict[str, Any]], item: dict[str, Any]) -> tuple[str, ...] | None:
        parts = [item["name"]]
        parent = item.get("parent")
        for _ in range(MAX_DEPTH):
            if parent == self._root:
                return tuple(reversed(parts))
            folder = items.get(parent) if isinstance(parent, str) else None
            if folder is None or folder["mime"] != FOLDER:
                return None  # outside the configured drive or folder
            parts.append(folder["name"])
            parent = folder.get("parent")
        return None

    def _level(self, item: dict[str, Any], parts: tuple[str, ...]) -> tuple[Classification, str | None]:
        mapped = [key for key in item["labels"] if key in self._config.labels]
        by_label = max((self._config.labels[key] for key in mapped), default=None)
        folder = "/".join(parts[:-1]).casefold() + "/"
        rules = [
            (len(path), level)
            for path, level in self._config.folders.items()
            if folder.startswith(path.strip("/").casefold() + "/") or path.strip("/") == ""
        ]
        by_folder = max(rules)[1] if rules else None
        levels = [level for level in (by_label, by_folder) if level is not None]
        if not levels:
            return max(Classification), None
        label = max(mapped, key=lambda k: self._config.labels[k]) if mapped else None
        return max(levels), label

    def _files(self, items: dict[str, dict[str, Any]], skipped: list[tuple[str, str]]) -> list[RemoteFile]:
        files: list[RemoteFile] = []
        for file_id, item in items.items():
            mime = item["mime"]
            if mime == FOLDER:
                continue
            parts = self._path(items, item)
            if parts is None:
                continue
            fetch = {"id": file_id}
            if mime in EXPORTS:
                export, suffix = EXPORTS[mime]
                fetch["export"] = export
                if not parts[-1].lower().endswith(suffix):
                    parts = (*parts[:-1], parts[-1] + suffix)
            elif mime.startswith("application/vnd.google-apps."):
                kind = mime.rsplit(".", 1)[-1]
                skipped.append((f"item {file_id}", f"a Google {kind} has no export ingest reads"))
                continue
            level, label = self._level(item, parts)
            files.append(RemoteFile(file_id, parts, item["version"], level, label, item["link"], None, fetch))
        return files

    def download(self, file: RemoteFile, out: BinaryIO, limit: int) -> None:
        base = f"{self._config.drive_url}/files/{quote(file.fetch['id'], safe='')}"
        if "export" in file.fetch:
            url = f"{base}/export?{urlencode({'mimeType': file.fetch['export']})}"
        else:
            url = f"{base}?{urlencode({'alt': 'media', 'supportsAllDrives': 'true'})}"
        # Drive serves content from its own host: the token goes with the request, as Drive requires.
        self._http.download(url, out, limit, headers=self._auth())
