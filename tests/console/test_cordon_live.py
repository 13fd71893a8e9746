"""Cordon and uncordon on a live fleet: a cordoned replica's robots keep streaming on it while a new robot lands on the
other replica; uncordon lets new robots in again. One cordon goes through the console (`C`, confirmed), the others
through `lerobot-fleet cordon|uncordon`.

Real parts: a router process, two real `PolicyServer` replicas (the fleet simulator's: the product's server with a stub
backend) and real robots (the product's engine, the simulator's robot host), all through the router.
"""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from fleet_helpers import sync, until
from lerobot_fleet.console.app import FleetConsoleApp
from lerobot_fleet.console.widgets import KeyedTable
from lerobot_fleet.data.model import RobotState
from lerobot_fleet.data.sources.zenoh_source import ZenohSource

from lerobot_policy_remote.testing.procs import VENV_BIN, Proc, Router
from lerobot_policy_remote.zenoh_config import ZenohSettings

pytestmark = pytest.mark.slow
REPLICAS = ("cord-a", "cord-b")
PY = str(VENV_BIN / "python")


def robot_host(endpoint: str, prefix: str, count: int, out) -> Proc:
    return Proc(
        [
            PY,
            "-m",
            "lerobot_policy_remote.testing.simfleet",
            "robots",
            "--endpoint",
            endpoint,
            "--count",
            str(count),
            "--prefix",
            prefix,
            "--seconds",
            "400",
            "--out",
            str(out / f"{prefix}.json"),
        ],
        name=prefix,
        max_seconds=420,
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    out = tmp_path_factory.mktemp("cordon")
    router = Router().start()
    procs: list[Proc] = []
    try:
        for replica in REPLICAS:
            procs.append(
                Proc(
                    [
                        PY,
                        "-m",
                        "lerobot_policy_remote.testing.simfleet",
                        "replica",
                        "--endpoint",
                        router.endpoint,
                        "--replica-id",
                        replica,
                        "--max-sessions",
                        "8",
                        "--max-batch",
                        "1",
                        "--infer-ms",
                        "20",
                        "--seconds",
                        "400",
                    ],
                    name=replica,
                    max_seconds=420,
                )
            )
        for p in procs:
            p.wait_for("REPLICA READY", timeout=120)
        first = robot_host(router.endpoint, "cord-arm", 2, out)
        procs.append(first)
        first.wait_for("ROBOTS READY", timeout=180)
        yield {"router": router, "out": out, "procs": procs}
    finally:
        for p in reversed(procs):
            p.stop()
        router.stop()


def fleet_verb(endpoint: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["timeout", "-s", "KILL", "60", str(VENV_BIN / "lerobot-fleet"), *args, "--router", endpoint],
        capture_output=True,
        text=True,
        timeout=70,
    )


def start_robot(fleet, prefix: str) -> Proc:
    p = robot_host(fleet["router"].endpoint, prefix, 1, fleet["out"])
    fleet["procs"].append(p)
    p.wait_for("ROBOTS READY", timeout=180)
    return p


@sync
async def test_a_cordoned_replica_keeps_its_robots_streaming_and_new_robots_land_elsewhere(fleet):
    endpoint = fleet["router"].endpoint
    settings = ZenohSettings(mode="client", connect_endpoints=[endpoint], connect_timeout_ms=2000)
    app = FleetConsoleApp(
        ZenohSource(settings, status_period_s=0.5, scrape_period_s=1.0), refresh_s=0.5, operator="pytest"
    )
    async with app.run_test(size=(160, 40)) as pilot:

        def robots():
            return {r.robot_id: r for r in app.current_snapshot().robots}

        def streaming_on(robot: str, replica: str) -> bool:
            r = robots().get(robot)
            return r is not None and r.state is RobotState.STREAMING and r.replica == replica

        def server(replica: str):
            return app.current_snapshot().server(replica)

        first = ("cord-arm-0000", "cord-arm-0001")
        await until(
            pilot,
            lambda: (
                all(
                    robots().get(r) and robots()[r].state is RobotState.STREAMING and robots()[r].replica for r in first
                )
                and all(server(x) for x in REPLICAS)
            ),
            60,
            "two robots streaming",
            tick=True,
        )
        cordoned = sorted({robots()[r].replica for r in first})[0]  # a replica with a robot on it
        other = next(x for x in REPLICAS if x != cordoned)
        kept = sorted(r for r in first if robots()[r].replica == cordoned)

        # cordon it from the console: the dialog, the acknowledgement, the row
        table = app.screen.query_one("#servers", KeyedTable)
        table.focus()
        table.select_key(cordoned)
        await pilot.press("C")
        await pilot.pause()
        await pilot.press("y")
        await until(
            pilot, lambda: app.last_result[0].startswith(f"cordon {cordoned}: ok"), 20, "cordon acknowledged", tick=True
        )
        await until(pilot, lambda: server(cordoned).health == "cordoned", 10, "the row says cordoned", tick=True)
        assert table.get_column_text(cordoned, "headroom") == "0 cordon"
        requests = {r: robots()[r].requests for r in kept}

        # a new robot lands on the other replica; the cordoned replica's robots keep streaming there
        await asyncio.to_thread(start_robot, fleet, "cord-new")
        await until(
            pilot, lambda: streaming_on("cord-new-0000", other), 60, f"the new robot streaming on {other}", tick=True
        )
        await until(
            pilot,
            lambda: all(streaming_on(r, cordoned) and robots()[r].requests >= requests[r] + 3 for r in kept),
            30,
            f"{kept} still streaming on {cordoned}",
            tick=True,
        )
        assert server(cordoned).active_sessions == len(kept)

        # uncordon it (the verb), cordon the other: the next new robot lands on it again
        for verb, target in (("uncordon", cordoned), ("cordon", other)):
            done = await asyncio.to_thread(fleet_verb, endpoint, verb, target)
            assert done.returncode == 0 and done.stdout.startswith(f"{verb} {target}: ok"), done.stdout + done.stderr
        await until(
            pilot,
            lambda: server(cordoned).health == "ok" and server(other).health == "cordoned",
            10,
            "the rows swapped",
            tick=True,
        )
        await asyncio.to_thread(start_robot, fleet, "cord-late")
        await until(
            pilot,
            lambda: streaming_on("cord-late-0000", cordoned),
            60,
            f"the late robot streaming on {cordoned}",
            tick=True,
        )
        assert streaming_on("cord-new-0000", other)  # the robot on the now cordoned replica stays
