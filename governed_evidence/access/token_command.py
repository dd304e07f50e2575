"""``governed-evidence token create|revoke|list``: the operator's side of the tokens file.

A token is printed once, by ``create``, and never again: the file keeps only its hash.
Handlers take ``(args, settings)`` and return an exit code, like the other commands; errors
in the file (malformed, unreadable) raise ConfigError and surface through the main CLI's
one error path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from governed_evidence.config import Classification, Settings, parse_level

__all__ = ["cmd_create", "cmd_list", "cmd_revoke", "register"]

_LEVELS = [c.label for c in Classification]
#: Exit status of a usage mistake, as argparse uses.
_USAGE = 2


def _tokens_file(args: argparse.Namespace, settings: Settings) -> Path | None:
    if args.tokens_file:
        return Path(args.tokens_file)
    if settings.tokens_file is not None:
        return settings.tokens_file
    print("error: no tokens file: give --tokens-file or set GOVERNED_EVIDENCE_TOKENS_FILE", file=sys.stderr)
    return None


# The tokens module (and fastmcp's auth, which it extends) is imported when a token command
# runs: the main CLI builds this parser for every command, `serve` and `search` included.


def cmd_create(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.access.tokens import create

    path = _tokens_file(args, settings)
    if path is None:
        return _USAGE
    clearance = parse_level(args.clearance)
    token = create(path, args.name, clearance)
    if args.json:
        print(json.dumps({"name": args.name, "clearance": clearance.label, "token": token}))
        return 0
    print(f"token for {args.name} (clearance {clearance.label}): {token}")
    print(
        "It will not be shown again (the tokens file keeps only its hash). "
        f"The caller sends it with every request as the header: Authorization: Bearer {token}"
    )
    return 0


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.access.tokens import revoke

    path = _tokens_file(args, settings)
    if path is None:
        return _USAGE
    if not revoke(path, args.name):
        print(f"error: no token named {args.name!r} in {path} (`token list` shows the names)", file=sys.stderr)
        return 1
    print(f"revoked the token of {args.name}; a server using {path} refuses it from its next request")
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.access.tokens import list_tokens

    path = _tokens_file(args, settings)
    if path is None:
        return _USAGE
    entries = list_tokens(path)
    if args.json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))
        return 0
    if not entries:
        print(f"no tokens in {path}")
        return 0
    width = max(len(e.name) for e in entries)
    for e in entries:
        print(f"{e.name:<{width}}  {e.clearance.label:<10}  created {e.created_at}")
    return 0


def _add_file(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokens-file", help="the tokens file (default: $GOVERNED_EVIDENCE_TOKENS_FILE)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``token`` and its sub-commands to the program's sub-parsers."""
    token = sub.add_parser("token", help="issue, revoke and list the bearer tokens of HTTP callers")
    actions = token.add_subparsers(dest="token_command", required=True, metavar="{create,revoke,list}")

    p = actions.add_parser("create", help="issue a token (printed once; only its hash is stored)")
    p.add_argument("--name", required=True, help="who holds it, as the audit trail names them (1-64 of A-Za-z0-9._@-)")
    p.add_argument("--clearance", required=True, choices=_LEVELS, help="highest level the holder may see")
    _add_file(p)
    p.add_argument("--json", action="store_true", help='print {"name", "clearance", "token"}')
    p.set_defaults(func=cmd_create)

    p = actions.add_parser("revoke", help="remove a token; a running server refuses it from its next request")
    p.add_argument("--name", required=True)
    _add_file(p)
    p.set_defaults(func=cmd_revoke)

    p = actions.add_parser("list", help="names, clearances and creation times (never tokens or hashes)")
    _add_file(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)
