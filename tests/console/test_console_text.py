"""Strings a robot or server controls reach no terminal, table or spreadsheet as commands.

Control characters (C0, C1, ESC sequences, bidi overrides) are stripped on the way into the console
(`sanitize.clean`, one sanitiser: `wire.text.printable`), rich markup in wire strings stays literal text, the
refusal log prints no escape, and CSV cells that a spreadsheet would run as a formula are neutralised.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import threading

import pytest
from lerobot_fleet.console import render
from lerobot_fleet.console.export import record, write
from lerobot_fleet.data.sanitize import clean
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing import VENV_BIN
from lerobot_policy_remote.testing.fake_robot import FakeRobot
from lerobot_policy_remote.testing.fake_server import FakeServer
from lerobot_policy_remote.wire.keys import Namespace, ServiceKeys
from lerobot_policy_remote.wire.messages import ModelInfo, RobotTelemetry, ServerStatus, SessionInfo

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "ok\x1b[2J\x1b]0;owned\x07\x9b31m\u202eevil\r\nFAKE LINE\t[bold red]markup[/]"


def test_clean_reaches_every_string_of_a_message():
    status = clean(
        ServerStatus(
            replica="gpu-0",
            model=ModelInfo(repo_or_path=HOSTILE),
            default_task=HOSTILE,
            action_names=[HOSTILE],
            sessions=[SessionInfo(session_id=HOSTILE, client_uuid="r")],
        )
    )
    for text in (status.model.repo_or_path, status.default_task, status.action_names[0], status.sessions[0].session_id):
        assert not UNSAFE.search(text) and "[bold red]markup[/]" in text, repr(text)


def test_wire_markup_is_shown_as_literal_text():
    """The console builds rich Text by appending, never by parsing markup: a robot's `[bold red]` stays visible."""
    store = FleetStore()
    ns = Namespace("org/m", "main", "task [link=http://x]y[/link]")
    store.on_robot_alive("r-1", True, ns)
    store.on_telemetry(
        clean(RobotTelemetry(client_uuid="r-1", state="STREAMING", model_id=HOSTILE, last_outcome=HOSTILE)), ns
    )
    row = store.snapshot().robots[0]
    line = "".join(text for text, _style in render.robot_cells(row))
    summary = render.robot_summary_text(store.robot_detail(row.row_key)).plain
    for text in (line, summary):
        assert not UNSAFE.search(text.replace("\n", ""))  # the layout's own line breaks only
    assert "[bold red]markup[/]" in line + summary
    assert "[link=http://x]y[/link]" in summary


def test_replayed_recordings_and_notes_are_cleaned_too(tmp_path):
    """A recording holds what the fleet sent; replaying it shows the same cleaned picture, and notes (which
    quote keys and peers' errors) are printable wherever they come from."""
    from lerobot_fleet.data.sources.replay import ReplaySource

    base = "@lerobot/m/main/t%1B%5B2J"  # a service name holding ESC [2J, percent-escaped in the key
    rec = tmp_path / "hostile.jsonl"
    rec.write_text(
        "\n".join(
            json.dumps(ev)
            for ev in (
                {"t": 0.0, "kind": "alive", "key": f"{base}/robot/r1/alive", "alive": True},
                {
                    "t": 0.1,
                    "kind": "telemetry",
                    "key": f"{base}/robot/r1/telemetry",
                    "data": {"client_uuid": "r1", "state": "DEGRADED", "last_outcome": HOSTILE},
                },
                {"t": 0.2, "kind": "bogus\x1b[2J", "key": f"{base}/robot/r1/telemetry"},
            )
        )
    )
    store = FleetStore()
    ReplaySource(rec, speed=0).start(store)
    snap = store.snapshot()
    row = snap.robots[0]
    assert row.service.startswith("t?[2J") and row.last_outcome.startswith("ok?[2J")
    assert snap.notes and not any(UNSAFE.search(n) for n in snap.notes), snap.notes


def test_csv_export_neutralises_formula_cells(tmp_path):
    store = FleetStore()
    ns = Namespace("org/m", "main", "task")
    store.on_robot_alive("r-1", True, ns)
    store.on_telemetry(
        RobotTelemetry(
            client_uuid="r-1",
            state="STREAMING",
            model_id='=HYPERLINK("http://x","y")',
            last_outcome="+1+cmd|' /C calc'!A0",
            replica="-2",
            session_id="@SUM(A1)",
            rtt_p50_ms=-0.0,
        ),
        ns,
    )
    rows = [record(r) for r in store.snapshot().robots]
    [path] = write({"robots": rows}, tmp_path, "t", "csv")
    with path.open(newline="") as f:
        got = next(csv.DictReader(f))
    assert got["model_id"] == '\'=HYPERLINK("http://x","y")'
    assert got["last_outcome"].startswith("'+1")
    assert got["replica"] == "'-2" and got["session_id"] == "'@SUM(A1)"
    assert got["robot_id"] == "r-1"  # ordinary text untouched
    for value in got.values():
        assert not value or value[0] not in "=+@\t\r" and not (value[0] == "-" and not _number(value)), value


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_refusal_log_prints_no_escape_sequences():
    """The filter process as the router runs it: a client's key and name land in the log printable."""
    lines = (
        "2026-01-01T00:00:00Z TRACE zenoh::net::routing::interceptor::access_control: access_control: "
        "abcd on Interface(lo)+CertCommonName(arm\x1b[31m-01) is unauthorized to put (ingress) "
        "on @lerobot/x\x1b]0;t\x07/y\n"
        "a passing line \x1b[2J\x9b5n with junk\n"
    )
    out = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "lerobot_fleet.router.acl_log", "0"],
        input=lines.encode(),
        capture_output=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "a passing line" in text and "ACL refused" in text, text
    assert not UNSAFE.search(text.replace("\n", "")), repr(text)


@pytest.mark.slow
def test_status_cli_prints_no_escape_sequences(router, zenoh_client):
    """`lerobot-fleet status` (text and JSON) against a fleet whose robot and server speak in escape sequences."""
    keys = ServiceKeys.for_service("org/text\x1b[31m", "main", "task\x1b]0;title\x07")
    s = zenoh_client()
    server = FakeServer(s, keys, replica="gpu-text", serve_obs=False)
    robot = FakeRobot(s, keys, "r-text", listen=False)
    stop = threading.Event()

    def publish() -> None:
        seq = 0
        while not stop.wait(0.2):
            seq += 1
            robot.publish_telemetry(
                RobotTelemetry(
                    client_uuid="r-text",
                    state="DEGRADED",
                    replica="gpu\x1b[5m",
                    seq=seq,
                    last_outcome=HOSTILE,
                    model_id=HOSTILE,
                )
            )

    t = threading.Thread(target=publish, daemon=True)
    t.start()
    try:
        for extra in ([], ["--json"]):
            out = subprocess.run(
                [str(VENV_BIN / "lerobot-fleet"), "status", "--router", router.endpoint, "--wait", "2", *extra],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            assert "r-text" in out.stdout and "gpu-text" in out.stdout, out.stdout
            assert not UNSAFE.search(out.stdout.replace("\n", "")), repr(out.stdout)
            if extra:
                robots = json.loads(out.stdout)["robots"]
                assert [r for r in robots if r["robot_id"] == "r-text"][0]["last_outcome"].startswith("ok?")
            else:
                assert "FAKE LINE" in out.stdout and "\nFAKE LINE" not in out.stdout  # no forged line
    finally:
        stop.set()
        t.join(timeout=3)
        robot.close()
        server.close()
