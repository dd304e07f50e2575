"""Publication guard: nothing secret or machine-specific goes into the repository.

Scans every file git would publish (tracked files plus untracked files that are not
ignored; ``--tracked-only`` restricts to the index) for:

- private key blocks, cloud access keys and secret keys, well-known API token shapes;
- password / secret / token assignments with a quoted literal value;
- URLs with an embedded password;
- absolute paths into a home directory, root's home or this workspace's root, which
  only ever point at one machine.

A finding fails the run unless the file and finding are on the ALLOWLIST below. Every
allowlist entry names exactly which kinds of finding it tolerates and why; absolute
paths are never allowlisted. Binary files (a NUL byte in the first 8 KiB) are skipped.

Usage: python scripts/publication_guard.py [--tracked-only] [--root DIR]
Exit status: 0 clean, 1 findings, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Each pattern is written so that its own source text does not match it.
PATTERNS: dict[str, re.Pattern[str]] = {
    # A header followed by key material (optional PEM headers, then base64); a header alone,
    # as in prose that names the format, is not a key.
    "private key": re.compile(
        r"-----BEGIN[A-Z0-9 ]* PRIVATE KEY(?: BLOCK)?-----\s*(?:[\w-]+:[^\n]*\n\s*)*[A-Za-z0-9+/=]{16,}"
    ),
    "cloud access key": re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b"),
    "cloud secret key": re.compile(r"(?i)\baws_?secret_?access_?key\b\s*[:=]\s*['\"]?[A-Za-z0-9/+]{20,}"),
    "api token": re.compile(
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|xox[abprs]-[A-Za-z0-9-]{10,}"
        r"|AIza[0-9A-Za-z_\-]{35}|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}|glpat-[A-Za-z0-9_\-]{20})"
    ),
    "password assignment": re.compile(
        r"(?ix)\b(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)"
        r"\s*[:=]\s*[\"'][^\"'\s]{4,}[\"']"
    ),
    "url with password": re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]+:[^\s@/'\"]{4,}@[\w.-]+"),
    # A path is machine-specific when it starts at the filesystem root (not inside a URL,
    # a relative path or after a template placeholder such as Graph's ``{id}/root/...``) and
    # enters a home directory or the workspace root.
    "absolute machine path": re.compile(
        r"(?<![\w.~}-])(?:/(?:home|Users)/[A-Za-z0-9_.-]+|/root|/work)(?=/)"
        r"|\b[A-Z]:\\\\?Users\\\\?[A-Za-z0-9_.-]+"
    ),
}

# file (relative to the repository root) -> finding kinds tolerated there, with the reason.
ALLOWLIST: dict[str, frozenset[str]] = {
    # The sample corpus seeds a fake break-glass credential block on purpose: ingest must
    # refuse those passages (data/sample_corpus.md, evals "secret" slice). Every value is
    # marked EXAMPLE and was never a real credential.
    "data/sample_corpus/internal/engineering/deployment-runbook.md": frozenset(
        {"private key", "cloud access key", "cloud secret key", "password assignment"}
    ),
    # Tests of the ingest credential detector build fake secrets (EXAMPLE values) at run
    # time; the detector must see realistic shapes to be tested at all.
    "tests/ingest/test_guards.py": frozenset({"password assignment", "cloud secret key", "url with password"}),
    # The small test corpus includes one fake password assignment so tests can check that
    # the passage is refused.
    "tests/helpers.py": frozenset({"password assignment"}),
    # Ingest tests plant fake secrets (in a heading, a title) and assert they never reach
    # the index file.
    "tests/ingest/test_pipeline.py": frozenset({"password assignment"}),
    # Tests of the statistics proxy setting give it made-up credentials (a password the
    # tests themselves invent) and assert they reach the proxy and no log, error or status.
    "tests/test_config.py": frozenset({"url with password"}),
    "tests/hardening/test_sdmx_network.py": frozenset({"password assignment", "url with password"}),
    # The connector tests give their local Graph and Drive servers a made-up client secret, grep
    # every output for it, refuse one written into the configuration file, and name a file like
    # an access key (a credential-shaped name must be skipped).
    "tests/connectors/conftest.py": frozenset({"password assignment"}),
    "tests/connectors/test_config_and_names.py": frozenset({"password assignment"}),
    "tests/connectors/test_graph_sync.py": frozenset({"password assignment", "cloud access key"}),
    # A CSV cell holding AWS's documented example key must cost its row, not the file.
    "tests/ingest/test_loaders_delimited.py": frozenset({"cloud access key"}),
    # doctor shows the proxy setting with its made-up password masked.
    "tests/test_cli_doctor.py": frozenset({"url with password"}),
}

SKIP_SUFFIXES = (".pdf", ".docx", ".png", ".jpg", ".jpeg", ".gif", ".onnx", ".sqlite", ".whl", ".gz", ".zip")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    kind: str

    def __str__(self) -> str:  # never print the matched text itself
        return f"{self.path}:{self.line}: {self.kind}"


def publishable_files(root: Path, tracked_only: bool) -> list[str]:
    args = ["git", "-C", str(root), "ls-files", "-z", "--cached"]
    if not tracked_only:
        args += ["--others", "--exclude-standard"]
    try:
        out = subprocess.run(args, check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"publication guard: cannot list files with git: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    names = sorted({n for n in out.decode("utf-8", "surrogateescape").split("\0") if n})
    return [n for n in names if (root / n).is_file() and not (root / n).is_symlink()]


def scan_text(path: str, text: str) -> Iterator[Finding]:
    for kind, pattern in PATTERNS.items():
        for match in pattern.finditer(text):
            yield Finding(path, text.count("\n", 0, match.start()) + 1, kind)


def scan(root: Path, names: Iterable[str]) -> tuple[list[Finding], list[Finding], int]:
    """(blocking findings, allowlisted findings, files scanned)."""
    blocking: list[Finding] = []
    allowed: list[Finding] = []
    scanned = 0
    for name in names:
        if name.lower().endswith(SKIP_SUFFIXES):
            continue
        data = (root / name).read_bytes()
        if b"\0" in data[:8192]:
            continue
        scanned += 1
        for finding in scan_text(name, data.decode("utf-8", "replace")):
            (allowed if finding.kind in ALLOWLIST.get(name, frozenset()) else blocking).append(finding)
    return blocking, allowed, scanned


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tracked-only", action="store_true", help="scan only files in the git index")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    root: Path = args.root
    names = publishable_files(root, args.tracked_only)
    blocking, allowed, scanned = scan(root, names)
    stale = sorted(
        f"{path}: {kind}"
        for path, kinds in ALLOWLIST.items()
        for kind in kinds
        if not any(f.path == path and f.kind == kind for f in allowed)
    )
    for finding in blocking:
        print(f"BLOCKED {finding}")
    print(
        f"publication guard: {scanned} files scanned, {len(blocking)} blocking finding(s), {len(allowed)} allowlisted"
    )
    if stale and os.environ.get("PUBLICATION_GUARD_VERBOSE"):
        print("allowlist entries that matched nothing (consider removing):", *stale, sep="\n  ")
    return 1 if blocking else 0


if __name__ == "__main__":
    sys.exit(main())
