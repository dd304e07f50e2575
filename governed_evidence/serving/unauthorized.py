"""What a request without a usable credential is told: 401 with a JSON body saying how to get one.

fastmcp answers a missing bearer token with 401 and an empty body, and a bad one with a
description written for OAuth clients that register themselves ("your client should
automatically re-register"), which this server's tokens never do. A client then shows only
"Server returned an error response". This middleware keeps the status and the
``WWW-Authenticate`` challenge and replaces the body with one JSON object: ``error``,
``error_description`` and a ``hint`` naming how a caller gets a credential for the
configured mode. It says nothing of the index: no counts, levels, model or names.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["UNAUTHORIZED_HINTS", "UnauthorizedBody", "unauthorized_body"]

#: How a caller gets a credential, per ``--auth`` mode.
UNAUTHORIZED_HINTS = {
    "tokens": "Send 'Authorization: Bearer <token>'. Ask the server's operator for a token: they issue one "
    "with 'governed-evidence token create --name NAME --clearance LEVEL --tokens-file FILE'.",
    "jwt": "Send 'Authorization: Bearer <access token>' with an access token from your organisation's identity "
    "provider for this server (its resource metadata, when published, names the provider).",
}


def unauthorized_body(mode: str, *, had_token: bool) -> bytes:
    """The JSON body of a 401 for ``mode``: the same for every caller and every index."""
    return json.dumps(
        {
            "error": "invalid_token" if had_token else "unauthorized",
            "error_description": "the bearer token was not accepted"
            if had_token
            else "this server needs a bearer token",
            "hint": UNAUTHORIZED_HINTS.get(mode, "Send 'Authorization: Bearer <token>'."),
        }
    ).encode()


class UnauthorizedBody:
    """ASGI middleware: every 401 gets :func:`unauthorized_body`, its headers kept."""

    def __init__(self, app: ASGIApp, mode: str) -> None:
        self.app = app
        self.mode = mode

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        had_token = any(
            name.lower() == b"authorization" and value[:7].lower() == b"bearer " for name, value in scope["headers"]
        )
        replacing = False

        async def wrapped(message: Message) -> None:
            nonlocal replacing
            if message["type"] == "http.response.start" and message["status"] == 401:
                replacing = True
                body = unauthorized_body(self.mode, had_token=had_token)
                kept = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in (b"content-length", b"content-type")
                ]
                headers: list[Any] = [
                    *kept,
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ]
                await send({**message, "headers": headers})
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
            if replacing:
                # The original body is dropped; the replacement was sent whole.
                return
            await send(message)

        await self.app(scope, receive, wrapped)
