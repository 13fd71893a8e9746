"""`lerobot-fleet rollout`: its arguments, its report (text and JSON) from a stubbed reply, its exit codes, its help,
and that it loads no heavy module."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from lerobot_fleet.cli import build_parser, main
from lerobot_fleet.data.model_compare import ModelFigures, compare_models
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import FleetStore
from lerobot_fleet.verbs import rollout as verb
from lerobot_fleet.verbs.rollout_args import canary_share
from rollout_fake import ACT_V2, FP_NEW, STATUS

from lerobot_policy_remote.testing.procs import VENV_BIN, free_port
from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry
from lerobot_policy_remote.wire.rollout import RolloutCommand, RolloutReply

OLD = Namespace(ACT_V2.model_id, "main", ACT_V2.service)


def _args(*words: str):
    return build_parser().parse_args(["rollout", *words])


def _fleet_store() -> FleetStore:
    store = FleetStore(clock=ManualClock(50.0))
    store.set_connection("connected")
    for robot, ns, fp, rtt in (("arm-1", OLD, "", 30.0), ("arm-2", OLD, "", 50.0), ("arm-3", ACT_V2, FP_NEW, 20.0)):
        store.on_robot_alive(robot, True, ns)
        tel = RobotTelemetry(robot, "STREAMING", ns.model_id, ns.service, revision=ns.revision, fingerprint=fp)
        tel.rtt_p50_ms, tel.rtt_p95_ms, tel.staleness_s = rtt, 2 * rtt, 0.5
        store.on_telemetry(tel, ns)
    return store


def _models() -> tuple[ModelFigures, ...]:
    return compare_models(_fleet_store().capture())


@pytest.mark.parametrize(("text", "share"), [("25%", 0.25), ("0.25", 0.25), ("1", 1.0), ("100%", 1.0), (" 5% ", 0.05)])
def test_canary_accepts_a_share_or_a_percentage(text: str, share: float):
    assert canary_share(text) == pytest.approx(share)


@pytest.mark.parametrize("text", ["0", "0%", "1.5", "150%", "-0.1", "a lot", ""])
def test_canary_outside_0_to_1_is_refused_in_one_line(text: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(ValueError, match="0 < c <= 1"):
        canary_share(text)
    assert main(["rollout", "start", "--to", "v2", "--canary", text, "--router", "tcp/127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lerobot-fleet rollout start: --canary takes a share") and "\n" not in err


def test_arguments_make_the_command():
    args = _args("start", "--to", FP_NEW[:8], "--canary", "25%", "--step", "2", "--abort-if", "errors > 3")
    assert (args.router, args.timeout, args.wait, args.json) == (None, 5.0, 2.5, False)
    command = verb.command_of(args)
    assert (command.action, command.to, command.canary, command.step, command.abort_if) == (
        "start",
        FP_NEW[:8],
        0.25,
        2,
        "errors > 3",
    )
    assert command.requested_by.endswith("via lerobot-fleet rollout")
    assert verb.command_of(_args("start", "--to", "v2")).canary == pytest.approx(0.1)
    assert verb.command_of(_args("rollback")).action == "abort"
    assert verb.command_of(_args("abort", "--json")).action == "abort"
    assert verb.command_of(_args("promote", "--router", "tls/r:7447", "--tls-ca", "ca.pem")).action == "promote"
    status = _args("status", "--json", "--wait", "0.5", "--timeout", "1")
    assert (verb.command_of(status).action, status.json, status.wait, status.timeout) == ("status", True, 0.5, 1.0)


def test_text_report_has_the_rollout_and_each_models_figures():
    text = verb.report_text(RolloutReply(True, "", STATUS), _models())
    lines = text.splitlines()
    assert lines[0].startswith("rollout r-0042: canary service 'pick up the cube'")
    assert f"lerobot/act_pick_place@main -> lerobot/act_pick_place@v2 {FP_NEW[:12]}" in lines[0]
    assert lines[1] == "robots: 5 waiting  1 moving  2 moved  0 returning  0 returned  0 failed"
    assert lines[2] == STATUS.message
    assert "  arm-02 moved (streaming from 9f2c4e1a7b3d)" in lines
    assert lines[lines.index("MODELS (2)") + 1].split() == [
        "service",
        "model",
        "robots",
        "stream",
        "rtt",
        "p50/p95",
        "degr%",
        "fallback/s",
        "chunk",
        "s",
        "errors",
    ]
    old = next(line for line in lines if "@main" in line and line.startswith("  pick"))
    assert old.split()[-7:] == ["2", "2", "40/100", "0", "0.00", "0.50", "0"]


def test_json_report_is_the_status_plus_the_models_by_name():
    out = verb.report_json(RolloutReply(True, "", STATUS), _models())
    json.dumps(out)  # plain JSON
    assert (out["rollout_id"], out["phase"], out["ok"]) == ("r-0042", "canary", True)
    assert out["to_model"] == {"model_id": ACT_V2.model_id, "revision": "v2", "fingerprint": FP_NEW}
    assert len(out["robots"]) == 8 and out["events"] == STATUS.events
    names = set(ModelFigures.__dataclass_fields__)
    assert names == {
        "model_id",
        "revision",
        "fingerprint",
        "service",
        "robots",
        "streaming",
        "rtt_p50_ms",
        "rtt_p95_ms",
        "degraded_rate",
        "fallback_rate",
        "chunk_age_s",
        "errors",
    }
    assert [set(m) for m in out["models"]] == [names, names]


class _Watch:
    """FleetWatch's part the verb uses, over a store the test filled; the reply is the test's."""

    reply = RolloutReply(True, "", STATUS)
    sent: list[RolloutCommand] = []

    def __init__(self, settings: object, period_s: float = 1.0) -> None:
        self.store = _fleet_store()
        self.source = self
        self.started = time.monotonic()

    def start(self) -> _Watch:
        return self

    def snapshot(self, min_s: float):
        return self.store.snapshot()

    def rollout(self, command: RolloutCommand, timeout: float) -> RolloutReply:
        self.sent.append(command)
        return self.reply

    def stop(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("reply", "code", "said"),
    [
        (RolloutReply(True, "", STATUS), 0, ""),
        (RolloutReply(False, "a rollout is under way: promote or abort it first", STATUS), 1, "the router refused"),
        (RolloutReply(False, "no fleet router answered at @x: rollouts are kept by `lerobot-fleet router`"), 2, "no "),
    ],
)
def test_exit_codes_and_the_one_line_that_says_what_to_do(monkeypatch, capsys, reply, code, said):
    monkeypatch.setattr(verb, "FleetWatch", _Watch)
    monkeypatch.setattr(_Watch, "reply", reply)
    monkeypatch.setattr(_Watch, "sent", [])
    assert main(["rollout", "promote", "--wait", "0", "--json"]) == code
    out, err = capsys.readouterr()
    assert json.loads(out)["ok"] is reply.ok and [c.action for c in _Watch.sent] == ["promote"]
    assert len(json.loads(out)["models"]) == 2
    if said:
        assert err.startswith(f"lerobot-fleet rollout promote: {said}") and err.count("\n") == 1
    else:
        assert err == ""


def test_rollout_help_works_and_the_verb_loads_no_heavy_module():
    for words in (["rollout"], ["rollout", "start"], ["rollout", "status"], ["rollout", "rollback"]):
        out = subprocess.run(
            [str(VENV_BIN / "python"), "-m", "lerobot_fleet.cli", *words, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and "usage" in out.stdout, out.stderr
    probe = (
        "import sys\nfrom lerobot_fleet.cli import main\n"
        f"code = main(['rollout', 'status', '--wait', '0.2', '--timeout', '0.5', '--router', "
        f"'tcp/127.0.0.1:{free_port()}'])\n"
        "print('LOADED=' + ','.join(m for m in ('cv2', 'numpy', 'torch', 'PIL', 'lerobot') if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    out = subprocess.run([str(VENV_BIN / "python"), "-c", probe], capture_output=True, text=True, timeout=90)
    assert out.returncode == 2, out.stdout + out.stderr  # no router there
    assert "LOADED=\n" in out.stdout or out.stdout.rstrip().endswith("LOADED="), out.stdout
    assert out.stderr.strip().startswith("lerobot-fleet rollout status: not connected to"), out.stderr
