"""The console and the verbs against a live local fleet: a real router, a real `lerobot-policy-server`
process serving a tiny real ACT, and a real `lerobot-rollout --inference.type=remote` robot (sim_arm).

Order matters (one fleet per module, drain last): status verb -> reset verb -> console in tmux ->
Pilot-driven reset and drain through the console's Zenoh source.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid

import pytest
from fleet_helpers import screen_text, sync, until
from lerobot_fleet.console.app import FleetConsoleApp
from lerobot_fleet.console.widgets import KeyedTable
from lerobot_fleet.data.model import RobotState
from lerobot_fleet.data.sources.zenoh_source import ZenohSource

from lerobot_policy_remote.testing import VENV_BIN, Proc, free_port, wait_until
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import SERVER_READY, policy_server, rollout_argv
from lerobot_policy_remote.zenoh_config import ZenohSettings

pytestmark = pytest.mark.slow
ROBOT = "console-arm-1"
REPLICA = "console-gpu-0"
FLEET = str(VENV_BIN / "lerobot-fleet")


@pytest.fixture(scope="module")
def fleet(router, tmp_path_factory):
    model = save_tiny_act(tmp_path_factory.mktemp("console_act") / "act", seed=3)
    task = f"console pick {uuid.uuid4().hex[:6]}"
    health = free_port()
    server = policy_server(
        model, task, router.endpoint, f"--replica_id={REPLICA}", health_port=health, max_seconds=400, wait=False
    )
    rollout = None
    try:
        server.wait_for(SERVER_READY, timeout=150)
        rollout = Proc(
            rollout_argv(
                model,
                task,
                router.endpoint,
                "--fps=30",
                f"--inference.client_uuid={ROBOT}",
                "--inference.request_timeout_s=2",
                "--inference.reconnect_max_backoff_s=1",
                "--inference.max_offline_s=120",
                "--return_to_initial_position=false",
                duration=300,
            ),
            name="rollout",
            max_seconds=400,
        )
        rollout.wait_for("executing session_id=", timeout=150)
        yield {"router": router, "server": server, "rollout": rollout, "health": health}
    finally:
        if rollout is not None:
            rollout.stop()
        server.stop()


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([FLEET, *args], capture_output=True, text=True, timeout=timeout)


def test_status_verb_sees_the_live_fleet(fleet):
    out = _run("status", "--json", "--router", fleet["router"].endpoint, "--wait", "3")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["connection"] == "connected"
    robot = next(r for r in data["robots"] if r["robot_id"] == ROBOT)
    assert robot["state"] in ("STREAMING", "DEGRADED") and robot["replica"] == REPLICA and robot["alive"] is True
    server = next(s for s in data["servers"] if s["replica"] == REPLICA)
    assert server["health"] == "ok" and server["active_sessions"] == 1 and ROBOT in server["session_robots"]
    assert server["metrics_url"].endswith(f":{fleet['health']}/metrics")
    text = _run("status", "--router", fleet["router"].endpoint, "--wait", "2")
    assert ROBOT in text.stdout and REPLICA in text.stdout


def test_reset_verb_advances_the_episode(fleet):
    before = json.loads(_run("status", "--json", "--router", fleet["router"].endpoint, "--wait", "2").stdout)
    ep = next(r for r in before["robots"] if r["robot_id"] == ROBOT)["episode_id"]
    out = _run("reset", ROBOT, "--json", "--router", fleet["router"].endpoint)
    assert out.returncode == 0, out.stdout + out.stderr
    ack = json.loads(out.stdout)
    assert ack["ok"] is True and ack["episode_id"] == ep + 1
    fleet["rollout"].wait_for("Operator episode reset applied", timeout=10)
    missing = _run("reset", "no-such-robot", "--router", fleet["router"].endpoint, "--timeout", "2")
    assert missing.returncode == 2 and "no robot answered" in missing.stdout
    # a robot that is not there is named as such (its token is absent while others are seen)
    assert "no-such-robot is not on the network" in missing.stdout, missing.stdout


def test_a_healthy_robot_opens_no_alert_with_the_default_rules(fleet):
    """The default alert rules over 15 s of a healthy live robot: nothing opens. Its telemetry
    carries its own max_action_age_s (3 s by default), from which the staleness threshold is derived."""
    from lerobot_fleet.data.alerts import AlertBook
    from lerobot_fleet.data.store import FleetStore

    from lerobot_policy_remote.testing.waiting import assert_never

    settings = ZenohSettings(mode="client", connect_endpoints=[fleet["router"].endpoint], connect_timeout_ms=2000)
    store = FleetStore()
    source = ZenohSource(settings, status_period_s=1.0, scrape_period_s=1.0)
    source.start(store)
    try:

        def robot():
            return next((r for r in store.snapshot().robots if r.robot_id == ROBOT), None)

        wait_until(
            lambda: (
                robot() is not None and robot().state is RobotState.STREAMING and len(robot().recent_staleness) >= 3
            ),
            30,
            message="the robot streaming with a few telemetry samples",
        )
        assert robot().max_action_age_s == 3.0
        book = AlertBook()
        assert_never(
            lambda: [a.message for a in book.update(store.snapshot(), store.clock())[0] if a.name == ROBOT],
            15,
            0.5,
            "an alert on a healthy robot",
        )
    finally:
        source.stop()


def test_console_in_a_real_terminal(fleet, tmp_path):
    """tmux runs the real `lerobot-fleet console`; we read the screen like an operator would.

    COLUMNS/LINES are unset: when tmux is started from under pytest the pane's shell gets COLUMNS=80,
    which `shutil.get_terminal_size()` (and so Textual) would prefer over the real 160x45 pane.
    """
    tmux = shutil.which("tmux")
    assert tmux, "tmux is required for the end-to-end console check (apt-get install -y tmux)"
    name = f"fleet-{uuid.uuid4().hex[:8]}"
    sock = str(tmp_path / "tmux.sock")
    subprocess.run(
        [
            tmux,
            "-S",
            sock,
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "160",
            "-y",
            "45",
            (
                f"env -u COLUMNS -u LINES timeout -s KILL 120 {FLEET} console "
                f"--router {fleet['router'].endpoint} --read-only"
            ),
        ],
        check=True,
        timeout=10,
    )
    try:
        screens = [""]

        def ready() -> bool:
            screens[0] = subprocess.run(
                [tmux, "-S", sock, "capture-pane", "-p", "-t", name], capture_output=True, text=True, timeout=10
            ).stdout
            return all(text in screens[0] for text in (ROBOT, REPLICA, " CONNECTED ", "STREAMING"))

        try:
            wait_until(
                ready, timeout=40, interval=0.5, message="the robot STREAMING and the replica on a CONNECTED console"
            )
        except AssertionError as exc:
            size = subprocess.run(
                [tmux, "-S", sock, "display", "-p", "-t", name, "#{window_width}x#{window_height}"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
            raise AssertionError(f"{exc}\npane {size}{screens[0]}") from None
        assert "READ-ONLY" in screens[0] and "Drain server" not in screens[0]
        subprocess.run([tmux, "-S", sock, "send-keys", "-t", name, "q"], check=True, timeout=10)
        wait_until(
            lambda: (
                subprocess.run(
                    [tmux, "-S", sock, "has-session", "-t", name], capture_output=True, timeout=10
                ).returncode
                != 0
            ),
            timeout=15,
            interval=0.3,
            message="the console quitting on q",
        )
    finally:
        subprocess.run([tmux, "-S", sock, "kill-server"], capture_output=True, timeout=10)


@sync
async def test_console_resets_a_robot_and_drains_the_server(fleet):
    settings = ZenohSettings(mode="client", connect_endpoints=[fleet["router"].endpoint], connect_timeout_ms=2000)
    app = FleetConsoleApp(
        ZenohSource(settings, status_period_s=1.0, scrape_period_s=1.0), refresh_s=0.5, operator="pytest"
    )
    async with app.run_test(size=(150, 45)) as pilot:
        store = app.store

        def robot():
            return store.snapshot().robot(ROBOT)

        def server():
            return store.snapshot().server(REPLICA)

        await until(
            pilot,
            lambda: robot() is not None and robot().state is RobotState.STREAMING,
            30,
            "robot streaming",
            tick=True,
        )
        await until(
            pilot,
            lambda: server() is not None and server().requests_per_s is not None,
            30,
            "server metrics scraped",
            tick=True,
        )
        assert server().n_max is not None and server().active_sessions == 1
        assert store.snapshot().connection == "connected"

        # reset the robot's episode from the fleet screen
        robots = app.screen.query_one("#robots", KeyedTable)
        robots.focus()
        robots.select_key(ROBOT)
        ep = robot().episode_id
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("y")
        await until(
            pilot, lambda: app.last_result[0].startswith(f"reset {ROBOT}: ok"), 15, "reset acknowledged", tick=True
        )
        assert f"episode now {ep + 1}" in app.last_result[0]
        await until(pilot, lambda: robot().episode_id == ep + 1, 10, "telemetry shows the new episode", tick=True)

        # drain the server: it finishes, tells the robot to move, and exits
        servers = app.screen.query_one("#servers", KeyedTable)
        servers.focus()
        servers.select_key(REPLICA)
        await pilot.press("d")
        await pilot.pause()
        assert ROBOT in screen_text(app)  # the dialog names the session that will move
        await pilot.press("y")
        await until(
            pilot, lambda: app.last_result[0].startswith(f"drain {REPLICA}: ok"), 15, "drain acknowledged", tick=True
        )
        assert "1 session(s) affected" in app.last_result[0]
        assert fleet["server"].wait(60) == 0, fleet["server"].output()[-2000:]
        await until(pilot, lambda: server().health == "gone", 20, "server marked gone", tick=True)
        await until(pilot, lambda: robot().state is not RobotState.STREAMING, 20, "robot left STREAMING", tick=True)
        assert "gone" in screen_text(app)
