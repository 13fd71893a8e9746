"""One live fleet, three readers: the console, `lerobot-fleet status` and `lerobot-fleet doctor` show the same room,
N_max and req/s for a replica, because all three compute them with `lerobot_fleet.data.capacity` from the same inputs.

Real parts: a router process, a real `PolicyServer` (the fleet simulator's replica: the product's server with a stub
backend, 100 ms per pass, one robot per pass) and two real robots (the product's engine, the simulator's robot host,
one request per second each). The three readers run side by side while the fleet streams.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from fleet_helpers import sync, until
from lerobot_fleet.console.app import FleetConsoleApp
from lerobot_fleet.console.render import SERVER_COLUMNS, server_cells
from lerobot_fleet.data.capacity import room, room_text
from lerobot_fleet.data.model import RobotState
from lerobot_fleet.data.sources.zenoh_source import ZenohSource

from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, Router
from lerobot_policy_remote.zenoh_config import ZenohSettings

pytestmark = pytest.mark.slow
REPLICA = "truth-a"
ROBOTS = ("truth-arm-0000", "truth-arm-0001")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    router = Router().start()
    py = str(VENV_BIN / "python")
    procs: list[Proc] = []
    try:
        replica = Proc(
            [
                py,
                "-m",
                "lerobot_policy_remote.testing.simfleet",
                "replica",
                "--endpoint",
                router.endpoint,
                "--replica-id",
                REPLICA,
                "--max-sessions",
                "8",
                "--max-batch",
                "1",
                "--infer-ms",
                "100",
                "--seconds",
                "400",
            ],
            name=REPLICA,
            max_seconds=420,
        )
        procs.append(replica)
        replica.wait_for("REPLICA READY", timeout=120)
        robots = Proc(
            [
                py,
                "-m",
                "lerobot_policy_remote.testing.simfleet",
                "robots",
                "--endpoint",
                router.endpoint,
                "--count",
                "2",
                "--prefix",
                "truth-arm",
                "--seconds",
                "400",
                "--out",
                str(tmp_path_factory.mktemp("truth") / "robots.json"),
            ],
            name="truth-robots",
            max_seconds=420,
        )
        procs.append(robots)
        robots.wait_for("ROBOTS READY", timeout=180)
        yield router
    finally:
        for p in reversed(procs):
            p.stop()
        router.stop()


def fleet_verb(*args: str) -> dict:
    p = subprocess.run(
        ["timeout", "-s", "KILL", "60", str(VENV_BIN / "lerobot-fleet"), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=70,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout)


@sync
async def test_console_status_and_doctor_show_the_same_room_n_max_and_request_rate(fleet):
    settings = ZenohSettings(mode="client", connect_endpoints=[fleet.endpoint], connect_timeout_ms=2000)
    app = FleetConsoleApp(
        ZenohSource(settings, status_period_s=1.0, scrape_period_s=1.0), refresh_s=0.5, operator="pytest"
    )
    async with app.run_test(size=(160, 40)) as pilot:

        def row():
            return app.current_snapshot().server(REPLICA)

        await until(
            pilot,
            lambda: (
                {r.robot_id for r in app.current_snapshot().robots if r.state is RobotState.STREAMING} >= set(ROBOTS)
                and row() is not None
                and row().active_sessions == 2
            ),
            60,
            "two robots streaming on the replica",
            tick=True,
        )
        # the replica's 10 s window full of steady traffic (two robots, about one request a second each)
        await until(
            pilot,
            lambda: (row().requests_per_s or 0) >= 1.5 and row().n_max is not None,
            40,
            "a steady request rate",
            tick=True,
        )
        await asyncio.sleep(4)
        before = row()
        status, doctor = await asyncio.gather(
            asyncio.to_thread(fleet_verb, "status", "--router", fleet.endpoint),
            asyncio.to_thread(fleet_verb, "doctor", "--router", fleet.endpoint),
        )
        app.tick()
        after = row()

    (s,) = [x for x in status["servers"] if x["replica"] == REPLICA]
    (d,) = [r for svc in doctor["services"] for r in svc["replicas"] if r["replica"] == REPLICA]
    readers = {
        "console": {
            "room": after.headroom,
            "room_limit": after.room_limit,
            "n_max": after.n_max,
            "rps": after.requests_per_s,
            "source": after.rate_source,
        },
        "status": {
            "room": s["headroom"],
            "room_limit": s["room_limit"],
            "n_max": s["n_max"],
            "rps": s["requests_per_s"],
            "source": s["rate_source"],
        },
        "doctor": {
            "room": d["room"],
            "room_limit": d["room_limit"],
            "n_max": d["n_max"],
            "rps": d["requests_per_s"],
            "source": d["rate_source"],
        },
    }
    # the same inputs: the replica's own request count (not three windows of three different lengths) ...
    assert {r["source"] for r in readers.values()} == {"server"}, readers
    # ... read a second or two apart from a fleet that streams steadily: the same figures, within that drift
    lo = min(before.requests_per_s, after.requests_per_s)
    hi = max(before.requests_per_s, after.requests_per_s)
    for name, r in readers.items():
        assert lo - 0.25 <= r["rps"] <= hi + 0.25, (name, readers)
        assert r["n_max"] == pytest.approx(after.n_max, abs=0.4), (name, readers)
        # room follows from N_max and the cap by the one formula; with N_max away from an integer, the same room
        assert (r["room"], r["room_limit"]) == room(r["n_max"], 8, 2, False), (name, readers)
        if abs(after.n_max - round(after.n_max)) > 0.4:
            assert (r["room"], r["room_limit"]) == (after.headroom, after.room_limit), (name, readers)
    # and the console's own cells say so
    cols = [k for k, _, _ in SERVER_COLUMNS]
    cells = server_cells(after)
    assert cells[cols.index("headroom")][0] == room_text(after.headroom, after.room_limit)
    assert (
        cells[cols.index("nmax")][0] == f"{after.n_max:.1f}"
        and cells[cols.index("rps")][0] == f"{after.requests_per_s:.1f}"
    )
