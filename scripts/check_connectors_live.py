"""Live check of the connectors against a real tenant: SharePoint / OneDrive and Google Drive.

For an operator with a tenant, outside CI (the test suite never leaves 127.0.0.1): each
source of a connectors configuration is synced into a temporary mirror (the real mirror is
left alone), and one line per check says what worked:

- the token (the app registration's secret, or the service account's key, from the
  environment variable the configuration names);
- the enumeration (Graph's delta pages, Drive's file pages) and how many files it listed;
- the labels: how many files have a label the mapping knows. None at all usually means the
  app may not read labels (Graph's extractSensitivityLabels refused with Sites.Selected
  alone, or Drive labels not shared with the service account): every file is then mirrored
  at the most sensitive level, which is safe but not what the mapping intends;
- the downloads, and the files skipped with their reasons.

The exit status is 0 when every source synced and at least one file had a mapped label, 1
otherwise. No secret, token or download URL is printed.

    .venv/bin/python scripts/check_connectors_live.py /etc/governed-evidence/connectors.toml
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from governed_evidence.config import Settings
from governed_evidence.connectors.command import sync
from governed_evidence.connectors.config import load_config
from governed_evidence.connectors.mirror import read_state
from governed_evidence.errors import GovernedEvidenceError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("config", help="the connectors' TOML configuration")
    args = parser.parse_args(argv)
    config = load_config(Path(args.config))
    failed = False
    with tempfile.TemporaryDirectory(prefix="connectors-check-") as scratch:
        for source in config.sources:
            one = dataclasses.replace(config, mirror=Path(scratch) / source.name / "mirror", sources=(source,))
            try:
                report = sync(one, Settings())
            except GovernedEvidenceError as exc:
                print(f"FAIL {source.name}: {exc}")
                failed = True
                continue
            summary = report.sources[0]
            files = read_state(one.mirror)["sources"][source.name]["files"].values()
            labelled = sum(1 for f in files if f["label"] in source.labels)
            levels = Counter(f["level"] for f in files)
            print(
                f"ok   {source.name}: token, enumeration and downloads: {summary.files} files mirrored "
                f"({summary.downloaded} downloaded), by level: {dict(sorted(levels.items()))}"
            )
            for what, why in summary.skipped:
                print(f"     skipped {what}: {why}")
            if labelled:
                print(f"ok   {source.name}: {labelled} of {summary.files} files have a label the mapping knows")
            else:
                print(
                    f"FAIL {source.name}: no file has a label the mapping knows; check that the app may read labels "
                    "and that the mapping names the tenant's label ids (every file is restricted until then)"
                )
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
