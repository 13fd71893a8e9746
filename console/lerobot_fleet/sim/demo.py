"""`lerobot-fleet demo`: a whole local fleet on loopback, then the console on top of it.

Router + two policy-server replicas serving a small RTC-capable policy (built on the spot, random
weights) + N simulated arms, each a real `lerobot-rollout --inference.type=remote` process. With
`--policy smolvla|pi0|pi05` the replicas serve a tiny offline checkpoint of that VLA family instead
(random weights, built in a child process by `lerobot_policy_remote.sim.vla_policy`) with real-time
chunking on. With `--second-model` a third replica serves other weights of that policy under revision
`v2`, in the same service, so that `lerobot-fleet rollout` has a model to move the robots to. Every child
runs in its own process group, logs to the work directory, and is ended by PID on exit. This module imports
neither torch nor lerobot: the heavy parts live in the child processes.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lerobot_fleet.sim.second_model import REVISION, derive_checkpoint
from lerobot_policy_remote.testing.procs import Proc, free_port, stop_all, tool

TASK = "pick the cube"  # no ": " — draccus would read it as a YAML mapping
POLICIES = ("toy", "smolvla", "pi0", "pi05")  # what the replicas serve (`--policy`)
VLA_NAMES = {"smolvla": "SmolVLA", "pi0": "pi0", "pi05": "pi0.5"}


def policy_env(policy: str) -> dict[str, str]:
    """What every child needs for `policy`: nothing for the toy; for a VLA, no hub access (the checkpoint is
    offline) and, for pi0 / pi0.5, the tiny sizes (`testing.tiny_pi.SITE_DIR` first on PYTHONPATH)."""
    if policy == "toy":
        return {}
    env = {"HF_HUB_OFFLINE": "1"}
    if policy in ("pi0", "pi05"):
        from lerobot_policy_remote.testing.tiny_pi import SITE_DIR  # stdlib-only module: no torch here

        path = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = f"{SITE_DIR}{os.pathsep}{path}" if path else str(SITE_DIR)
    return env


def build_command(policy: str, path: Path) -> tuple[str, list[str]]:
    """(what is built, the child's argv) for the demo's policy."""
    if policy == "toy":
        return "a small RTC-capable policy (random weights)", [
            sys.executable,
            "-m",
            "lerobot_policy_remote.sim.toy",
            str(path),
        ]
    return (
        f"a tiny offline {VLA_NAMES[policy]} checkpoint (random weights)",
        [sys.executable, "-m", "lerobot_policy_remote.sim.vla_policy", policy, str(path)],
    )


@dataclass
class Fleet:
    """The demo's children: each logs to `<workdir>/<name>.log`, is ended by PID, and can be started again by hand
    with `sh <workdir>/<name>.sh` (the same command and environment: a drained replica rejoins under its id)."""

    workdir: Path
    env: dict[str, str] = field(default_factory=dict)  # added to every child's environment (policy_env)
    children: list[Proc] = field(default_factory=list)

    def spawn(self, name: str, argv: list[str]) -> Proc:
        again = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        (self.workdir / f"{name}.sh").write_text(
            f"# {name} of lerobot-fleet demo, as the demo started it\nexec env {' '.join(again)} {shlex.join(argv)}\n"
        )
        child = Proc(argv, name=name, env=self.env, max_seconds=None, log=self.workdir / f"{name}.log", keep_lines=200)
        self.children.append(child)
        return child

    def stop(self) -> None:
        """SIGTERM every child, newest first (robots tear down, servers drain), then SIGKILL what is left."""
        stop_all(reversed(self.children), timeout=15)


def recording_flags(record_dir: Path | None, robot: str) -> list[str]:
    """`sentry` into `<record_dir>/<robot>` (a local LeRobotDataset, never pushed); base without a record dir.

    sentry records every executed action with its `remote.degraded` mark; an operator's episode reset from
    the console saves the episode in progress and starts the next (docs/robot.md, Recording)."""
    if record_dir is None:
        return ["--strategy.type=base"]
    return [
        "--strategy.type=sentry",
        f"--dataset.repo_id=local/rollout_{robot.replace('-', '_')}",
        f"--dataset.root={record_dir / robot}",
        "--dataset.push_to_hub=false",
        f"--dataset.single_task={TASK}",
    ]


def start_fleet(
    fleet: Fleet,
    robots: int,
    port: int,
    duration: float,
    say: Callable[[str], None] = print,
    record_dir: Path | None = None,
    kind: str = "toy",
    second_model: bool = False,
) -> str:
    """Bring the fleet up; returns the router endpoint. With `record_dir`, every robot records its episodes there.
    `kind` is what the replicas serve (POLICIES); a VLA is served with RTC on (`--rtc.enabled=true`). With
    `second_model`, one more replica serves other weights of the same policy under revision REVISION, in the
    same service, for a rollout to move the robots to."""
    endpoint = f"tcp/127.0.0.1:{port}"
    policy = fleet.workdir / "policy"
    what, argv = build_command(kind, policy)
    say(f"[demo] building {what} in {policy} ...")
    build = fleet.spawn("build-policy", argv)
    if build.wait(timeout=300) != 0:
        hint = (
            "" if kind == "toy" else f" (--policy {kind} needs the vla extra: pip install 'lerobot_policy_remote[vla]')"
        )
        raise RuntimeError(f"building the demo policy failed{hint}; see {build.log}:\n{build.tail(40)}")
    second = None
    if second_model:
        second = fleet.workdir / f"policy-{REVISION}"
        say(f"[demo] deriving the second model (other weights, revision {REVISION}) in {second} ...")
        derive_checkpoint(policy, second)

    say(f"[demo] starting the Zenoh router on {endpoint} ...")
    router = fleet.spawn(
        "router",
        [tool("lerobot-fleet"), "router", "--listen", endpoint, "--rollout-state", str(fleet.workdir / "rollout.json")],
    )
    router.wait_for("Zenoh router up", 30)

    per_server = max(1, (robots + 1) // 2 + 1)
    servers = []
    for replica in ("demo-a", "demo-b"):
        say(f"[demo] starting policy server replica {replica} (max {per_server} sessions) ...")
        servers.append(fleet.spawn(f"server-{replica}", server_argv(policy, replica, per_server, endpoint, kind)))
    if second is not None:
        # a seat for every robot (`rollout promote` moves them all onto this one replica) and one to spare, so the
        # promoted fleet does not show its replica full
        seats = robots + 1
        say(f"[demo] starting policy server replica demo-{REVISION} (revision {REVISION}, max {seats} sessions) ...")
        argv = server_argv(second, f"demo-{REVISION}", seats, endpoint, kind, revision=REVISION)
        servers.append(fleet.spawn(f"server-demo-{REVISION}", argv))
    for server in servers:
        server.wait_for("Policy server up", 180 if kind == "toy" else 300)

    for i in range(robots):
        uuid = f"sim-arm-{i + 1:02d}"
        say(f"[demo] starting robot {uuid} (lerobot-rollout --inference.type=remote --robot.type=sim_arm) ...")
        fleet.spawn(
            uuid,
            [
                tool("lerobot-rollout"),
                *recording_flags(record_dir, uuid),
                "--inference.type=remote",
                f"--inference.connect_endpoint={endpoint}",
                f"--inference.client_uuid={uuid}",
                f"--inference.fallback={'repeat_last' if i % 3 == 2 else 'hold'}",
                "--robot.type=sim_arm",
                *camera_flags(Path(policy)),
                f"--robot.id={uuid}",
                f"--policy.path={policy}",
                f"--task={TASK}",
                "--fps=30",
                f"--duration={duration}",
                "--return_to_initial_position=false",
            ],
        )
    return endpoint


def server_argv(policy: Path, replica: str, seats: int, endpoint: str, kind: str, revision: str = "") -> list[str]:
    """One replica's command line; `revision` names another namespace of the same service (`--model.revision`)."""
    return [
        tool("lerobot-policy-server"),
        f"--model.repo_or_path={policy}",
        *([f"--model.revision={revision}"] if revision else []),
        f"--default_task={TASK}",
        f"--replica_id={replica}",
        f"--max_sessions={seats}",
        f"--health_port={free_port()}",
        f"--zenoh.connect_endpoints=[{endpoint}]",
        *([] if kind == "toy" else ["--rtc.enabled=true"]),
    ]


def rollout_hint(endpoint: str) -> str:
    """The "fleet is up" line's last sentence with `--second-model`: a rollout to try, in one line."""
    return (
        f"Try a rollout: lerobot-fleet rollout start --to {REVISION} --canary 50% --router {endpoint} "
        "(or press m in the console)"
    )


def camera_flags(policy: Path) -> list[str]:
    """The sim arm's cameras at the size the policy was trained on (its config's image features), so that the
    server has no image to resize and the robot no size warning to show; none when it takes no image."""
    try:
        features = json.loads((policy / "config.json").read_text()).get("input_features", {})
    except (OSError, ValueError):
        return []
    cams = {
        key.removeprefix("observation.images."): spec["shape"]
        for key, spec in features.items()
        if key.startswith("observation.images.") and len(spec.get("shape", ())) == 3
    }
    if not cams:
        return []
    inner = ", ".join(f"{name}: {{height: {shape[1]}, width: {shape[2]}}}" for name, shape in cams.items())
    return [f"--robot.cameras={{{inner}}}"]


def port_taken(port: int, host: str = "127.0.0.1") -> str:
    """'' when the demo's router can listen on host:port; else what to do, naming --port."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # a port in TIME_WAIT is free for the router; a listener is not
        try:
            s.bind((host, port))
        except OSError as exc:
            return (
                f"port {port} on {host} is already in use ({exc.strerror}; another router or demo?): "
                f"pick another with --port, e.g. lerobot-fleet demo --port {free_port()}"
            )
    return ""


def run_demo(
    robots: int = 4,
    port: int = 7447,
    duration: float = 3600,
    console: bool = True,
    workdir: str | None = None,
    record_dir: str | None = None,
    policy: str = "toy",
    second_model: bool = False,
) -> int:
    if policy not in POLICIES:
        print(f"lerobot-fleet demo: --policy {policy!r} is not one of {', '.join(POLICIES)}", file=sys.stderr)
        return 2
    taken = port_taken(port)
    if taken:  # before building anything: said at once, exit 2 like every usage error
        print(f"lerobot-fleet demo: {taken}", file=sys.stderr)
        return 2
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="lerobot-fleet-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    records = Path(record_dir).resolve() if record_dir else None
    if records is not None and records.exists() and any(records.iterdir()):
        print(
            f"lerobot-fleet demo: --record-dir {records} is not empty: each robot creates a new dataset there; "
            "pick an empty or new directory",
            file=sys.stderr,
        )
        return 2
    fleet = Fleet(work, env=policy_env(policy))
    stop = {"now": False}

    def on_signal(*_: object) -> None:
        stop["now"] = True

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        endpoint = start_fleet(
            fleet, robots, port, duration, record_dir=records, kind=policy, second_model=second_model
        )
        served = "" if policy == "toy" else f", serving tiny {VLA_NAMES[policy]} with RTC"
        print(
            f"[demo] fleet is up: router {endpoint}{served}, logs and restart scripts in {work}"
            + (f", datasets in {records}" if records else "")
            + (f". {rollout_hint(endpoint)}" if second_model else "")
        )
        if console:
            from lerobot_fleet.console.app import FleetConsoleApp
            from lerobot_fleet.data.sources.zenoh_source import ZenohSource, operator_name
            from lerobot_policy_remote.zenoh_config import ZenohSettings

            settings = ZenohSettings(
                mode="client", connect_endpoints=[endpoint], connect_timeout_ms=2000, lease_ms=2000
            )
            FleetConsoleApp(ZenohSource(settings), operator=f"{operator_name()} via lerobot-fleet demo").run()
        else:
            print(
                "[demo] running without the console; Ctrl-C stops the fleet. "
                f"Watch it with: lerobot-fleet console --router {endpoint}"
            )
            deadline = time.monotonic() + duration
            while not stop["now"] and time.monotonic() < deadline:
                time.sleep(0.5)
        return 0
    except (RuntimeError, OSError) as exc:  # a child that never came up (NotReady), a checkpoint not copied
        print(f"lerobot-fleet demo: {exc}", file=sys.stderr)
        return 1
    finally:
        print("[demo] stopping the fleet ...")
        fleet.stop()
        for sig, handler in old.items():
            signal.signal(sig, handler)
        print(f"[demo] stopped; logs kept in {work}" + (f", datasets in {records}" if records else ""))
