"""Fixtures: recorded SDMX responses served through httpx.MockTransport (no network)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from governed_evidence.config import Settings
from governed_evidence.sdmx.service import SdmxService
from tests.sdmx.helpers import FakeClock, FakeProviders


@pytest.fixture
def fake() -> FakeProviders:
    return FakeProviders()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


ServiceFactory = Callable[..., SdmxService]


@pytest.fixture
def make_service(tmp_path: Path, fake: FakeProviders, clock: FakeClock) -> Iterator[ServiceFactory]:
    """Services over ``fake`` sharing one cache file in ``tmp_path`` (a restart = a new service)."""
    made: list[SdmxService] = []

    def make(providers_toml: str | None = None, **overrides: object) -> SdmxService:
        values: dict[str, object] = {
            "db": tmp_path / "no-index.sqlite",
            "sdmx_cache_path": tmp_path / "sdmx-cache.sqlite",
            "sdmx_max_retries": 2,
        }
        if providers_toml is not None:
            path = tmp_path / f"providers-{len(made)}.toml"
            path.write_text(providers_toml)
            values["sdmx_providers"] = path
        values.update(overrides)
        settings = Settings(**values)  # type: ignore[arg-type]
        service = SdmxService.from_settings(settings, transport=fake.transport(), sleep=clock.sleep, clock=clock)
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()
