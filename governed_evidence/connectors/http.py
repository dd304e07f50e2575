"""HTTP for the connectors: throttling honoured within a deadline, bodies bounded, secrets never echoed.

Microsoft Graph and Google Drive both answer ``429`` (and Graph ``503``) with ``Retry-After``
when a client asks too fast; the client waits as told, but never past the sync's deadline, so
a source that keeps throttling (or answers slowly: each socket operation has a timeout) fails
the sync with a clear error instead of hanging a scheduled job. Redirects are not followed:
a download URL is fetched by the caller, deliberately without the Authorization header.

Error messages name the method, host and path and the status (with the API's short error code
when it gives one), never a query string (a pre-authenticated download URL carries its token
there), a request body (a client secret, a signed assertion) or a response body.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import httpx

from governed_evidence.errors import ConnectorError

__all__ = ["Http", "where"]

_RETRIED = frozenset({429, 503})
_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,63}")
#: Connection failures retried (with these waits) before the sync gives up.
_NETWORK_WAITS = (1.0, 2.0, 4.0)


def where(url: str) -> str:
    """``url`` without its query string or fragment: safe for a message."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _retry_after(response: httpx.Response, now: float) -> float:
    value = response.headers.get("Retry-After", "").strip()
    if value.isdigit():
        return float(value)
    if value:
        when = email.utils.parsedate_to_datetime(value) if "," in value else None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    return 1.0


def _error_code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else error if isinstance(error, str) else None
    return f" ({code})" if isinstance(code, str) and _CODE.fullmatch(code) else ""


class Http:
    """One sync's HTTP client: a deadline over all its requests and their throttling waits."""

    def __init__(
        self,
        *,
        timeout: float,
        deadline_seconds: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # trust_env off: a proxy or netrc set for other programs must not see these tokens.
        self._client = httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False)
        self._sleep = sleep
        self._clock = clock
        self._deadline = clock() + deadline_seconds

    def close(self) -> None:
        self._client.close()

    def _wait(self, seconds: float, what: str) -> None:
        if self._clock() + seconds > self._deadline:
            raise ConnectorError(f"{what}: the source asked to wait {seconds:.0f} s, past the sync's deadline")
        self._sleep(seconds)

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        data: Mapping[str, str] | None = None,
        ok: frozenset[int] = frozenset({200}),
    ) -> httpx.Response:
        """The response once its status is in ``ok``, throttling waited out; else :class:`ConnectorError`."""
        what = f"{method} {where(url)}"
        network = iter(_NETWORK_WAITS)
        while True:
            if self._clock() > self._deadline:
                raise ConnectorError(f"{what}: the sync's deadline passed")
            try:
                response = self._client.request(method, url, headers=headers, data=data)
            except httpx.TimeoutException:
                raise ConnectorError(f"{what}: the source did not answer in time") from None
            except httpx.HTTPError as exc:
                wait = next(network, None)
                if wait is None:
                    raise ConnectorError(f"{what}: {type(exc).__name__}") from None
                self._wait(wait, what)
                continue
            if response.status_code in ok:
                return response
            if response.status_code in _RETRIED:
                self._wait(_retry_after(response, self._clock()), what)
                continue
            raise ConnectorError(f"{what}: HTTP {response.status_code}{_error_code(response)}")

    def json(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        response = self.request(method, url, **kwargs)
        try:
            body = response.json()
        except ValueError:
            raise ConnectorError(f"{method} {where(url)}: the answer is not JSON") from None
        if not isinstance(body, dict):
            raise ConnectorError(f"{method} {where(url)}: the answer is not a JSON object")
        return body

    def download(self, url: str, out: BinaryIO, limit: int, *, headers: Mapping[str, str] | None = None) -> None:
        """Stream ``url``'s body into ``out``; cut short, over ``limit`` or refused: :class:`ConnectorError`."""
        what = f"GET {where(url)}"
        while True:
            if self._clock() > self._deadline:
                raise ConnectorError(f"{what}: the sync's deadline passed")
            try:
                with self._client.stream("GET", url, headers=headers) as response:
                    if response.status_code in _RETRIED:
                        wait = _retry_after(response, self._clock())
                    elif response.status_code != 200:
                        raise ConnectorError(f"{what}: HTTP {response.status_code}")
                    else:
                        written = 0
                        for chunk in response.iter_bytes():
                            written += len(chunk)
                            if written > limit:
                                raise ConnectorError(f"{what}: larger than {limit} bytes")
                            out.write(chunk)
                        expected = response.headers.get("Content-Length")
                        if expected is not None and expected.isdigit() and int(expected) != written:
                            raise ConnectorError(f"{what}: the download ended early")
                        return
            except httpx.TimeoutException:
                raise ConnectorError(f"{what}: the source did not answer in time") from None
            except httpx.HTTPError as exc:
                raise ConnectorError(f"{what}: the download failed ({type(exc).__name__})") from None
            self._wait(wait, what)
