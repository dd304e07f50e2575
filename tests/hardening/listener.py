"""A TCP listener on 127.0.0.1 that serves each connection on a thread of its own.

The scripted SDMX provider (test_sdmx_faults.py) and the forward proxy
(test_sdmx_network.py) both need one: a fault that stalls one connection must not hold up
the next.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

__all__ = ["Listener"]


class Listener:
    """Accepts on a port chosen by the system; ``handle`` gets each connection (and closes it)."""

    def __init__(self, handle: Callable[[socket.socket], None], backlog: int = 32) -> None:
        self._handle = handle
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(backlog)
        self.port: int = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self._server.close()
