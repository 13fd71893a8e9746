"""Fixtures with real parts: an embedded Zenoh router process on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lerobot_policy_remote.testing.procs import Router


@pytest.fixture(scope="session")
def router() -> Iterator[Router]:
    """One router for the whole run (tests isolate themselves by service name)."""
    r = Router().start()
    yield r
    r.stop()


@pytest.fixture
def own_router() -> Iterator[Router]:
    """A router this test may kill and restart."""
    r = Router().start()
    yield r
    r.stop()


@pytest.fixture
def zenoh_client(router: Router):
    """Factory for client sessions through the shared router; all are closed after the test."""
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    sessions = []

    def make(**overrides):
        settings = ZenohSettings(mode="client", connect_endpoints=[router.endpoint], **overrides)
        s = open_session(settings)
        sessions.append(s)
        return s

    yield make
    for s in sessions:
        s.close()
