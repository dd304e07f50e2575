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
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    """Serves the page at /index.html and logs every request it sees, with the page that asked
    (its Referer): as a proxy it sees the absolute address of any host the browser asks for."""

    page: bytes = b""
    seen: ClassVar[list[tuple[str, str]]] = []

    def _refuse(self) -> None:
        self.seen.append((f"{self.command} {self.path}", self.headers.get("Referer", "")))
        self.send_error(403)

    def do_GET(self) -> None:
        if not self.path.endswith("/index.html"):
            self._refuse()
            return
        self.seen.append((f"GET {self.path}", self.headers.get("Referer", "")))
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    do_CONNECT = do_POST = do_HEAD = _refuse

    def log_message(self, format: str, *args: object) -> None:
        return


class _Server(ThreadingHTTPServer):
    # server_close() waits for every request being handled, so the log is whole when read.
    daemon_threads = False
    block_on_close = True


@contextmanager
def _proxy(page: bytes) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    handler = type("Handler", (_Proxy,), {"page": page, "seen": []})
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler.seen
    finally:
        # A connection the browser opened just before it exited may still wait to be accepted:
        # serve until none has waited for half a second (bounded), then stop.
        for _ in range(40):
            if not select.select([server.socket], [], [], 0.5)[0]:
                break
            time.sleep(0.1)
        server.shutdown()
        server.server_close()


#: A name that is not loopback, so the browser cannot treat the page as local and skip the proxy.
URL = "http://report.invalid/index.html"


def _from_the_page(seen: list[tuple[str, str]]) -> list[str]:
    """The requests the page made: every one but the page itself that names it as referrer (the
    browser's own background requests, which the proxy sees too, name none)."""
    return [line for line, referer in seen if referer.startswith("http://report.invalid") and line != f"GET {URL}"]


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


def test_every_chart_renders_in_headless_chromium_and_nothing_leaves_the_page(report: Path, tmp_path: Path) -> None:
    with _proxy(report.read_bytes()) as (port, seen):
        image = _screenshot(URL, port, tmp_path)
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
    assert (f"GET {URL}", "") in seen
    assert _from_the_page(seen) == [], seen


def test_the_proxy_sees_a_page_that_does_reach_out(report: Path, tmp_path: Path) -> None:
    """The check above can fail: the same page without its policy and with one image from
    elsewhere is caught asking for it."""
    page = report.read_text(encoding="utf-8")
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    page = page.replace("<body>", '<body><img src="http://elsewhere.invalid/pixel.png" alt="">', 1)
    with _proxy(page.encode()) as (port, seen):
        _screenshot(URL, port, tmp_path)
    assert "GET http://elsewhere.invalid/pixel.png" in _from_the_page(seen), seen
