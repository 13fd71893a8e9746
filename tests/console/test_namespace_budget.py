"""One robot id counts for at most MAX_NAMESPACES_PER_ID namespaces in the console: its samples in more are dropped and
an alert names it, so one certificate (which may publish in any namespace its inventory entry allows) cannot use up the
console's namespace budget and hide the robots that come after it. Real router, the console's real Zenoh source."""

from __future__ import annotations

import uuid

import pytest
from lerobot_fleet.data.admission import MAX_NAMESPACES, MAX_NAMESPACES_PER_ID, Admission
from lerobot_fleet.data.alerts import AlertBook
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.wire.codec import encode
from lerobot_policy_remote.wire.keys import Namespace, ServiceKeys
from lerobot_policy_remote.wire.messages import RobotTelemetry
from lerobot_policy_remote.zenoh_config import ZenohSettings


def test_one_id_is_admitted_in_a_few_namespaces_only():
    a = Admission(max_namespaces=8, max_rows=100, max_per_id=2)
    ns = [Namespace(f"m{i}", "main", "t") for i in range(10)]
    assert a.admit("robot", "arm-1", ns[0]) == a.admit("robot", "arm-1", ns[1]) == ""
    assert a.admit("robot", "arm-1", ns[0]) == ""  # a row it has stays
    why = a.admit("robot", "arm-1", ns[2])
    assert why == "robot arm-1 is in more than 2 namespaces: its samples in another (m2 / t) are dropped"
    assert a.spilled == {("robot", "arm-1"): 1} and a.refused == 1
    assert a.admit("server", "arm-1", ns[2]) == ""  # per (role, id): a replica of the same name is another row
    for i in range(3, 8):  # other robots still find room
        assert a.admit("robot", f"arm-{i}", ns[i]) == ""


@pytest.mark.slow
def test_one_robot_in_many_namespaces_cannot_hide_the_robots_after_it(router, zenoh_client):
    s = zenoh_client()
    tag = uuid.uuid4().hex[:6]
    store = FleetStore()
    source = ZenohSource(
        ZenohSettings(
            mode="client", connect_endpoints=[router.endpoint], connect_timeout_ms=1000, retry_period_max_ms=300
        ),
        status_period_s=0.3,
        scrape_period_s=0.5,
    )
    source.start(store)

    def put(robot: str, model: str) -> None:
        s.put(
            ServiceKeys.for_service(model, "main", "t").robot(robot, "telemetry"),
            encode(RobotTelemetry(client_uuid=robot, state="STREAMING")),
        )

    try:
        wait_until(lambda: store.snapshot().connection == "connected", timeout=15, message="connected")

        def probe() -> bool:  # the source's subscriber is declared at the router once a sample gets through
            put(f"r-probe-{tag}", f"org/probe-{tag}")
            return source.received >= 1

        wait_until(probe, timeout=15, interval=0.1, message="the source receiving")
        base = source.received
        crowder = f"r-crowd-{tag}"
        n = MAX_NAMESPACES + 44  # more than the whole budget, all under one robot id (one certificate)
        for i in range(n):
            put(crowder, f"org/crowd-{tag}-{i}")
        late = [f"r-late-{tag}-{i}" for i in range(3)]
        for i, robot in enumerate(late):  # robots that come after it, each in a namespace of its own
            put(robot, f"org/late-{tag}-{i}")
        wait_until(lambda: source.received >= base + n + len(late), timeout=20, message="every sample decoded")
        wait_until(
            lambda: {r.robot_id for r in store.snapshot().robots} >= set(late),
            timeout=10,
            message="the robots after it shown",
        )  # the decoder applies a batch's telemetry after counting it
        snap = store.snapshot()
        assert len([r for r in snap.robots if r.robot_id == crowder]) == MAX_NAMESPACES_PER_ID
        assert source.admission.spilled[("robot", crowder)] == n - MAX_NAMESPACES_PER_ID
        assert any(
            f"robot {crowder} is in more than {MAX_NAMESPACES_PER_ID} namespaces" in note for note in snap.notes
        ), snap.notes
        book = AlertBook()
        opened, _ = book.update(snap, store.clock())
        [alert] = [a for a in opened if a.rule == "namespaces"]
        assert (alert.name, alert.role, alert.target) == (crowder, "robot", f"robot:{crowder}")
        assert alert.message.startswith(
            f"publishes in more than {MAX_NAMESPACES_PER_ID} namespaces: {n - MAX_NAMESPACES_PER_ID} sample(s)"
        )
    finally:
        source.stop()


def test_the_alert_lasts_while_the_drops_go_on_and_can_be_turned_off():
    from lerobot_fleet.data.alerts import NAMESPACE_SPILL_RECENT_S, AlertRules, evaluate
    from lerobot_fleet.data.model import FleetSnapshot, NamespaceSpill

    def snap(age: float) -> FleetSnapshot:
        return FleetSnapshot("r", "connected", 0.0, (), (), spills=(NamespaceSpill("robot", "arm-x", 12, 4, age),))

    assert ("namespaces", "robot:arm-x") in evaluate(snap(1.0), AlertRules())
    assert evaluate(snap(NAMESPACE_SPILL_RECENT_S + 1), AlertRules()) == {}
    assert evaluate(snap(1.0), AlertRules(namespace_drops=0)) == {}
    assert evaluate(snap(1.0), AlertRules.load(None, namespace_drops=20.0)) == {}  # the --alert-namespace-drops flag
