"""A server the router refuses is listed by the console: the router's ACL log keeps a board of refused servers.

Real mTLS router with `--inventory` (fleet_pki.py), a real `lerobot-policy-server` started with `rogue`'s server
certificate outside its namespace and `--router_refused=retry` (it stays up, refused), and the console's own live
source reading through an operator's certificate. A robot's certificate may not read the board.
"""

from __future__ import annotations

import uuid

import pytest
from fleet_pki import acl_fleet, server_tls
from lerobot_fleet.data.sources.refused import query_refused
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing.procs import policy_server
from lerobot_policy_remote.testing.waiting import wait_until
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    task = f"board pick {uuid.uuid4().hex[:6]}"
    with acl_fleet(tmp_path_factory, "board", seed=4) as (pki, model, router):
        server = policy_server(
            model,
            task,
            router.endpoint,
            "--router_refused=retry",
            *server_tls(pki, "rogue"),
            name="server-rogue",
            health_port=None,
            max_seconds=300,
            wait=False,
        )
        try:
            refused = "lerobot-policy-server: warning: the router's access control refuses this replica"
            server.wait_for(refused, timeout=90)
            yield {"pki": pki, "model": model, "task": task, "router": router}
        finally:
            server.stop()


def settings(fleet, cert: str) -> ZenohSettings:
    pki = fleet["pki"]
    return ZenohSettings(
        mode="client",
        connect_endpoints=[fleet["router"].endpoint],
        tls_root_ca_certificate=str(pki / "ca.crt"),
        tls_connect_certificate=str(pki / f"{cert}.crt"),
        tls_connect_private_key=str(pki / f"{cert}.key"),
    )


def test_an_operator_reads_the_refused_server_from_the_router(fleet):
    session = open_session(settings(fleet, "alice"))
    try:
        board = wait_until(
            lambda: query_refused(session), timeout=20, message="the router's board lists the refused server"
        )
    finally:
        session.close()
    assert [(s.cn, s.replica) for s in board] == [("rogue", "rogue")]
    s = board[0]
    assert (s.model, s.service) == (str(fleet["model"]), fleet["task"])
    assert s.key.endswith("/server/rogue/status") and s.age_s < 30
    assert "lerobot-fleet pki issue DIR rogue --role server --namespace" in s.notice()


def test_a_robot_certificate_may_not_read_the_board(fleet):
    session = open_session(settings(fleet, "arm-a"))
    try:
        assert query_refused(session) == ()
    finally:
        session.close()


def test_the_console_shows_the_refused_server_as_a_row_a_note_and_an_event(fleet):
    store = FleetStore()
    source = ZenohSource(settings(fleet, "alice"), status_period_s=0.5, scrape_period_s=5.0)
    source.start(store)
    try:
        notes = wait_until(
            lambda: [n for n in store.capture().notes if n.startswith("server rogue: refused by router")],
            timeout=30,
            message="the console's notes list the refused server",
        )
        row = store.snapshot().server("rogue")
    finally:
        assert source.stop()
    assert "CN=rogue may not serve" in notes[0]
    assert row is not None and (row.health, row.cn, row.service) == ("refused", "rogue", fleet["task"])
    assert row.n_max is None and row.headroom is None and row.requests_per_s is None  # unknown, never zeros
    events = [e for e in store.events() if "refused by router" in e.text]
    assert len(events) == 1 and events[0].server == "rogue"
