"""SdmxService made on first use, for the MCP server.

The statistics tools are registered at start-up (their schemas need only the models and
the validation patterns), but the service behind them needs httpx, the parsers and a
writable cache connection. Importing and opening those costs the server's first answer
about a tenth of a second and is not needed until a statistics tool or the status is
called, so the service is made then. The providers file is still read at start-up: a
configuration mistake stops the server instead of surfacing on a later call.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from governed_evidence.config import Settings
from governed_evidence.sdmx.models import StatisticsCacheStatus
from governed_evidence.sdmx.providers import load_providers

if TYPE_CHECKING:
    from governed_evidence.sdmx.service import SdmxService

__all__ = ["DeferredSdmxService"]


class DeferredSdmxService:
    """Holds what ``SdmxService.from_settings`` needs and makes the service once, when asked."""

    def __init__(self, settings: Settings, *, db: Path | None = None) -> None:
        self._settings = settings
        self._db = db
        self._providers = load_providers(settings.sdmx_providers)
        self._service: SdmxService | None = None
        self._lock = threading.Lock()

    @property
    def created(self) -> bool:
        """Whether the service exists yet (no statistics tool or status has been called)."""
        return self._service is not None

    def get(self) -> SdmxService:
        """The service, made on the first call; tool calls run on worker threads, hence the lock."""
        if self._service is None:
            with self._lock:
                if self._service is None:
                    from governed_evidence.sdmx.service import SdmxService

                    self._service = SdmxService.from_settings(self._settings, db=self._db, providers=self._providers)
        return self._service

    def status(self) -> StatisticsCacheStatus:
        return self.get().status()

    def close(self) -> None:
        """Close the service if it was made; nothing to do otherwise."""
        if self._service is not None:
            self._service.close()
