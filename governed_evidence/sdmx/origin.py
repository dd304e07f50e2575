"""Where a request to a provider may go: its origin, under its base path, to public addresses.

The client asks these before every request and every redirect, and the transport asks
:func:`checked_addresses` before every connection, so a URL builder's mistake, a
provider's redirect or a host name that resolves to 169.254.169.254 cannot move a
request off the configured base:

- same scheme, host and port as the provider's base, and no credentials;
- a path below the base path that moves nowhere once a server decodes it (no dot
  segments, no second level of percent-encoding, no backslash or control character);
- without a proxy, every address the host name resolves to public, unless the provider
  allows private networks.
"""

from __future__ import annotations

import socket
import urllib.parse

import httpcore

from governed_evidence.errors import UnusableResponseError
from governed_evidence.sdmx.providers import Provider, is_public_address, url_origin

__all__ = ["PrivateAddressError", "check_redirect", "check_request_url", "checked_addresses"]


class PrivateAddressError(Exception):
    """A host name resolved to a non-public address; raised inside the transport, reported by the client."""


def checked_addresses(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, if all of them are public.

    Raises
    ------
    PrivateAddressError
        When any of them is loopback, private, link-local or otherwise not public.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        # What httpcore would have raised had it resolved the name itself.
        raise httpcore.ConnectError(str(exc)) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    # One private address among public ones is refused too: which one a connection gets
    # is not ours to choose, and a rebinding name answers with both.
    if not addresses or not all(is_public_address(a) for a in addresses):
        raise PrivateAddressError
    return addresses


def _same_origin(provider: Provider, url: str) -> bool:
    """Same scheme, host and port as the provider's base, and no user info."""
    try:
        parts = urllib.parse.urlsplit(url)
        # Credentials in a redirect would be sent as a login; no provider URL carries any.
        return url_origin(url) == provider.origin and parts.username is None and parts.password is None
    except ValueError:  # an unreadable port
        return False


def _under_base_path(provider: Provider, url: str) -> bool:
    """The path is below the base path and moves nowhere once a server decodes it."""
    base = urllib.parse.urlsplit(provider.base_url).path.rstrip("/") + "/"
    path = urllib.parse.urlsplit(url).path
    if not path.startswith(base):
        return False
    rest = urllib.parse.unquote(path[len(base) :])
    return (
        # A second decoding (%252e), a backslash or a control character could still move it.
        rest.isprintable()
        and not any(c in rest for c in "%\\")
        and not any(segment in (".", "..") for segment in rest.split("/"))
    )


def check_request_url(provider: Provider, url: str) -> None:
    """Refuse a request URL outside the provider's configured base.

    Raises
    ------
    UnusableResponseError
        Unreachable through the URL builders; a guard against a future caller.
    """
    if not (
        _same_origin(provider, url) and url.startswith(provider.base_url + "/") and _under_base_path(provider, url)
    ):
        raise UnusableResponseError(f"refusing a request outside provider {provider.id}'s configured base")


def check_redirect(provider: Provider, target: str) -> None:
    """A redirect may move within the provider's base, never beside or above it.

    Raises
    ------
    UnusableResponseError
        When ``target`` is on another origin or outside the base path (it is not followed).
    """
    if not _same_origin(provider, target):
        raise UnusableResponseError(
            f"provider {provider.id} redirected outside its configured base (another host, scheme or port); "
            "the redirect was not followed"
        )
    if not _under_base_path(provider, target):
        raise UnusableResponseError(
            f"provider {provider.id} redirected outside its configured base path; the redirect was not followed"
        )
