"""`governed-evidence eval --report DIR` on the sample corpus, opened in a real headless Chromium
(Debian's package; `make browser` installs it, CI runs it first): every chart is drawn in the
screenshot, and the page asks nothing of the network.

Chromium is sent through a proxy on 127.0.0.1 for every address, loopback included, so each
request the page makes, to any host, reaches the proxy's log: the page itself must be the only
one. Each chart draws in colours of its own (evaluation.charts), counted in the screenshot's
pixels.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from governed_evidence.evaluation.charts import RECALL_COLOURS, SHIPPED_COLOUR, SLICE_COLOURS, TRADEOFF_COLOURS

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 7000

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (`make browser` installs Debian's package)"),
]


@pytest.fixture(scope="module")
def report(sample_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample corpus's report, as `governed-evidence eval --report DIR` writes it."""
    out = tmp_path_factory.mktemp("rendered") / "out"
    env = {**os.environ, "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "governed_evidence", "eval", "--db", str(sample_index), "--report", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"report written to {out / 'index.html'}" in done.stderr
    return out / "index.html"


class _Proxy(BaseHTTPRequestHandler):
    """Serves the page at /index.html and logs every request line it sees (as a proxy it sees
    the absolute address of any host the browser asks for)."""

    page: bytes = b""
    seen: ClassVar[list[str]] = []

    def _refuse(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_error(403)

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path}")
        if self.path.endswith("/index.html"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(self.page)))
            self.end_headers()
            self.wfile.write(self.page)
        else:
            self.send_error(404)

    do_CONNECT = do_POST = do_HEAD = _refuse

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def proxy(report: Path) -> Iterator[tuple[int, list[str]]]:
    handler = type("Handler", (_Proxy,), {"page": report.read_bytes(), "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler.seen
    finally:
        server.shutdown()
        server.server_close()


def _screenshot(url: str, port: int, tmp_path: Path) -> np.ndarray:
    from PIL import Image

    shot = tmp_path / "report.png"
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
            f"--proxy-server=http://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>",
            f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )  # fmt: skip
    assert shot.is_file(), done.stdout + done.stderr
    with Image.open(shot) as image:
        return np.asarray(image.convert("RGB"))


def _pixels(image: np.ndarray, colour: str, tolerance: int = 6) -> int:
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(image.astype(np.int16) - rgb).max(axis=2) <= tolerance).sum())


def test_every_chart_renders_in_headless_chromium_and_nothing_leaves_the_page(
    proxy: tuple[int, list[str]], tmp_path: Path
) -> None:
    port, seen = proxy
    # A name that is not loopback, so the browser cannot treat the page as local and skip the proxy.
    url = "http://report.invalid/index.html"
    image = _screenshot(url, port, tmp_path)
    assert image.shape[1] == WIDTH
    counts = {
        "slices (hybrid bars)": _pixels(image, SLICE_COLOURS["hybrid"]),
        "trade-off curve (hybrid)": _pixels(image, TRADEOFF_COLOURS["hybrid"]),
        "shipped threshold": _pixels(image, SHIPPED_COLOUR),
        "recall@10 bars": _pixels(image, RECALL_COLOURS["recall@10"]),
        "recall@50 bars": _pixels(image, RECALL_COLOURS["recall@50"]),
        "the verdict's PASS banner": _pixels(image, "#e5f5e0", tolerance=2),
    }
    assert {name: n for name, n in counts.items() if n < 40} == {}, counts
    # The count finds only what is drawn: a mode that was not run has no bars.
    assert _pixels(image, SLICE_COLOURS["keyword"]) == 0
    # The page, and at most the icon the browser asks for by itself (refused): nothing else, anywhere.
    assert seen[0] == f"GET {url}"
    assert [line for line in seen[1:] if line != "GET http://report.invalid/favicon.ico"] == []
