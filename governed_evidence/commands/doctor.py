"""``doctor``: the effective settings and where each came from, and what works and what does not.

Each setting is shown with its source (the environment variable that set it, or the
default); secrets are shown only as set or not. Then the checks: the index (readable, its
schema, its integrity, the model it was built with against the one configured), the
embedding model (it loads and embeds), and, with ``--providers``, whether each statistics
provider's host answers (through ``GOVERNED_EVIDENCE_SDMX_PROXY`` when set). Each problem
comes with what to do about it; the exit code is 1 when there is one.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import SecretStr

from governed_evidence import composition
from governed_evidence.commands.common import LEVELS, index_path, search_service
from governed_evidence.config import Settings
from governed_evidence.errors import GovernedEvidenceError

__all__ = [
    "PROBE_TIMEOUT_S",
    "Check",
    "check_index",
    "check_model",
    "check_providers",
    "register",
    "run_doctor",
    "setting_rows",
]

_PREFIX = "GOVERNED_EVIDENCE_"
#: Seconds each provider has to answer ``--providers``.
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    check: str
    ok: bool
    detail: str
    #: What to do about a problem (None when there is none).
    advice: str | None = None


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "doctor", help="the effective settings and where each came from; checks of the index, model and providers"
    )
    p.add_argument("--db")
    p.add_argument("--ceiling", choices=LEVELS)
    p.add_argument(
        "--providers", action="store_true", help="also check that each statistics provider's host answers (network)"
    )
    p.add_argument("--json", action="store_true", help="print the settings and checks as JSON")
    p.set_defaults(func=run_doctor)


def setting_rows(settings: Settings) -> list[dict[str, str]]:
    """Each setting's effective value and source; a secret's value is never shown."""
    rows = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            shown = "(set, not shown)"
        elif value is None or value == "":
            shown = "(none)"
        else:
            shown = str(value)
        variable = _PREFIX + name.upper()
        source = f"environment ({variable})" if name in settings.model_fields_set else "default"
        rows.append({"setting": variable, "value": shown, "source": source})
    return rows


def check_index(args: argparse.Namespace, settings: Settings) -> tuple[list[Check], str | None]:
    """The index's checks, and the model it was built with (None when it cannot be read)."""
    db = index_path(args, settings)
    status = composition.server_status(search_service(args, settings), None)
    if not status.ok:
        return [
            Check(
                "index",
                False,
                f"{db.absolute()}: {status.problem}",
                "build it with 'governed-evidence ingest --corpus DIR --db FILE' (an index of another "
                "schema: rebuild it, see docs/upgrading.md)",
            )
        ], status.embedding_model
    checks = [
        Check(
            "index",
            status.integrity != "failed",
            f"{db.absolute()}: schema {status.schema_version}, integrity {status.integrity}, built {status.built_at}, "
            f"{status.documents} documents visible at ceiling {status.ceiling}",
            "the file is damaged: rebuild it with 'governed-evidence ingest'" if status.integrity == "failed" else None,
        )
    ]
    if status.semantic_search != "available":
        checks.append(
            Check(
                "meaning search",
                False,
                status.semantic_search_reason or "unavailable",
                "build the index with the embedder this server is configured with "
                "(GOVERNED_EVIDENCE_EMBEDDER), or configure the one the index was built with",
            )
        )
    return checks, status.embedding_model


def check_model(settings: Settings, index_model: str | None) -> Check:
    """The configured embedder loads and embeds, and is the one the index was built with."""
    from governed_evidence.embeddings.factory import make_embedder

    try:
        embedder = make_embedder(settings)
        embedder.embed(["a test sentence"])
    except GovernedEvidenceError as exc:
        return Check(
            "embedding model", False, str(exc), "reinstall with 'make install', or check the embedder settings"
        )
    model = embedder.identity.model_id
    if index_model is not None and index_model != model:
        return Check(
            "embedding model",
            False,
            f"{model} loads, but the index was built with {index_model}",
            "rebuild the index with this model, or set GOVERNED_EVIDENCE_EMBEDDER to the index's",
        )
    return Check("embedding model", True, f"{model} loads and embeds")


def check_providers(settings: Settings) -> list[Check]:
    """Whether each provider's host answers at all (any HTTP status counts: it was reached)."""
    import httpx

    from governed_evidence.sdmx.providers import load_providers

    proxy = settings.sdmx_proxy.get_secret_value() if settings.sdmx_proxy else None
    checks = []
    with httpx.Client(timeout=PROBE_TIMEOUT_S, proxy=proxy, trust_env=False, follow_redirects=False) as client:
        for provider in load_providers(settings.sdmx_providers):
            host = httpx.URL(provider.base_url).netloc.decode()
            try:
                answer = client.get(provider.base_url)
            except httpx.HTTPError as exc:
                checks.append(
                    Check(
                        f"provider {provider.id}",
                        False,
                        f"{host} could not be reached ({type(exc).__name__})",
                        "check the network; behind a proxy set GOVERNED_EVIDENCE_SDMX_PROXY "
                        "(proxies from the environment are ignored)",
                    )
                )
                continue
            checks.append(Check(f"provider {provider.id}", True, f"{host} answered (HTTP {answer.status_code})"))
    return checks


def run_doctor(args: argparse.Namespace, settings: Settings) -> int:
    checks, index_model = check_index(args, settings)
    checks.append(check_model(settings, index_model))
    if args.providers:
        checks.extend(check_providers(settings))
    rows = setting_rows(settings)
    if args.json:
        print(json.dumps({"settings": rows, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        width = max(len(r["setting"]) for r in rows)
        print("settings:")
        for r in rows:
            print(f"  {r['setting']:<{width}} {r['value']}  [{r['source']}]")
        print("checks:")
        for c in checks:
            print(f"  {'ok     ' if c.ok else 'PROBLEM'} {c.check}: {c.detail}")
            if c.advice:
                print(f"          what to do: {c.advice}")
    return 0 if all(c.ok for c in checks) else 1
