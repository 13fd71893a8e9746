r"""The fleet simulator's two kinds of process: stub replicas and robot hosts (`lerobot-fleet simulate` starts them).

    python -m lerobot_policy_remote.testing.simfleet replica --endpoint tcp/127.0.0.1:7447 --replica-id sim-r0 \
        --max-sessions 300
    python -m lerobot_policy_remote.testing.simfleet robots --endpoint tcp/127.0.0.1:7447 --first 0 --count 250 \
        --seconds 60 --out r.json

A replica is the product's `PolicyServer` with a `StubBackend` (fixed pass time, batching on). A robot host runs
`count` robots, each the product's `RemoteInferenceEngine` over its own `ZenohLink` (own liveliness token, keys,
session id, state machine, telemetry), all declared on ONE Zenoh session of the process (multiplexing: what is
shared is the TCP connection, never a robot's keys or state). One thread steps their network workers
(`engine.step()`, as `bench/peers` does) and ticks their control loops at 30 fps (`RobotHost.loop`): observations
go at the chunk cadence the engine decides (`buffer_time_s`), small frames (state only), chunks merged by the
engine's queue. Nothing here re-implements the protocol: it is the robot's own code, stepped many times per process
(the host itself is `robot_host.py`).

The host writes one JSON report at the end of its window: per robot its state, chunks/s, staleness, stale actions
executed, its state history, and the host's CPU; with `--stop-file` its robots keep running until that file exists
(the orchestrator creates it once every host has reported, so no host's teardown falls in another's window).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ..heap import settle_after_startup
from .fake_robot import SIM_ARM_ACTION_NAMES
from .robot_host import CHUNK, MODEL, TASK, HostReport, RobotHost

if TYPE_CHECKING:
    from ..server.service import PolicyServer


# ---------------------------------------------------------------- replica
def start_stub_replica(
    endpoint: str,
    replica_id: str,
    max_sessions: int,
    max_batch: int,
    infer_s: float,
    per_robot_s: float,
    revision: str = "main",
    fingerprint: str = "stub" * 16,
) -> PolicyServer:
    """The simulator's replica, started: the product's server with a stub backend (also what `bench/costs.py` runs,
    so that its figures are the simulator's replica's). `revision` and `fingerprint`: which model it stands for (a
    rollout moves robots between two)."""
    from ..server.manifest import BatchingSpec, Manifest, ModelSpec
    from ..server.service import PolicyServer
    from ..server.stub import StubBackend
    from ..zenoh_config import ZenohSettings

    settings = ZenohSettings(mode="client", connect_endpoints=[endpoint])
    manifest = Manifest(
        model=ModelSpec(repo_or_path=MODEL, revision=revision),
        default_task=TASK,
        max_sessions=max_sessions,
        health_port=0,
        warmup_inferences=0,
        replica_id=replica_id,
        zenoh=settings,
        session_grace_s=3.0,
        drain_timeout_s=10.0,
        batching=BatchingSpec(max_batch=max_batch, max_wait_ms=0.0),
    )
    backend = StubBackend(
        infer_s,
        SIM_ARM_ACTION_NAMES,
        chunk_size=CHUNK,
        max_sessions=max_sessions,
        per_robot_s=per_robot_s,
        fingerprint=fingerprint,
    )
    return PolicyServer(manifest, backend=backend, progress=lambda s: None, settle=settle_after_startup).start()


def run_replica(a: argparse.Namespace) -> int:
    server = start_stub_replica(
        a.endpoint,
        a.replica_id,
        a.max_sessions,
        a.max_batch,
        a.infer_ms / 1000.0,
        a.per_robot_ms / 1000.0,
        revision=a.revision,
        fingerprint=a.fingerprint or "stub" * 16,
    )
    print(f"REPLICA READY {a.replica_id}", flush=True)
    try:
        server.wait(a.seconds)
    finally:
        server.stop()
    return 0


# ---------------------------------------------------------------- robots


def run_robots(a: argparse.Namespace) -> int:
    import os

    host = RobotHost(
        a.endpoint,
        a.first,
        a.count,
        prefix=a.prefix,
        revision=a.revision,
        telemetry_period_s=a.telemetry_period,
        telemetry_max_period_s=a.telemetry_max_period,
    )

    def write(report: HostReport) -> None:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f)
        os.replace(tmp, a.out)  # the orchestrator sees a whole report or none
        print("ROBOTS MEASURED", flush=True)

    linger = (lambda: not os.path.exists(a.stop_file)) if a.stop_file else None
    try:
        host.start()
        settle_after_startup()  # 250 engines' objects: out of every later full collection
        report_now = (lambda: os.path.exists(a.report_file)) if a.report_file else None
        host.run(a.seconds, on_report=write, linger=linger, report_now=report_now)
    finally:
        host.stop()
    print("ROBOTS DONE", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("replica")
    r.add_argument("--endpoint", required=True)
    r.add_argument("--replica-id", required=True)
    r.add_argument("--max-sessions", type=int, default=300)
    r.add_argument("--max-batch", type=int, default=32)
    r.add_argument("--infer-ms", type=float, default=10.0)
    r.add_argument("--per-robot-ms", type=float, default=0.2)
    r.add_argument("--seconds", type=float, default=3600.0)
    r.add_argument("--revision", default="main", help="the model revision it serves (its namespace)")
    r.add_argument("--fingerprint", default="", help="the checkpoint fingerprint it claims (default: the stub's)")
    b = sub.add_parser("robots")
    b.add_argument("--endpoint", action="append", required=True, help="router endpoint (repeatable: failover order)")
    b.add_argument("--first", type=int, default=0)
    b.add_argument("--count", type=int, default=10)
    b.add_argument("--prefix", default="sim-arm")
    b.add_argument("--revision", default="main", help="the model revision its robots start on (their namespace)")
    b.add_argument("--seconds", type=float, default=30.0)
    b.add_argument("--telemetry-period", type=float, default=1.0)
    b.add_argument("--telemetry-max-period", type=float, default=1.0)
    b.add_argument("--out", required=True)
    b.add_argument("--stop-file", default="", help="after the report, keep the robots running until this file exists")
    b.add_argument("--report-file", default="", help="take the report as soon as this file exists (else at --seconds)")
    a = p.parse_args(argv)
    return run_replica(a) if a.role == "replica" else run_robots(a)


if __name__ == "__main__":
    sys.exit(main())
