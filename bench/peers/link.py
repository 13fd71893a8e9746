"""A constrained link: two network namespaces joined by a veth pair, `tc tbf` on both ends for the
bandwidth, and a delay relay (these kernels have no netem) holding each segment RTT/2 each way.

Servers (and our router) live in the server namespace; the robot and the relay in the robot one.
Per system and link: time to first chunk (client start to first chunk, connection set-up included),
round trip p50/p99 (stub S = 20 ms), and how often a 30 fps robot's action queue ran dry.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Any

from . import procs
from .workload import Log, Sizes, pct

if TYPE_CHECKING:  # run.py imports this module: its Server is named for the checker only
    from .run import Server

# a gigabit LAN (where most users start: robot and GPU box on one switch), then two constrained links
LINKS = {"1gbit-0.5ms": ("1gbit", 0.5), "100mbit-20ms": ("100mbit", 20.0), "20mbit-40ms": ("20mbit", 40.0)}
C_IP, S_IP = "10.77.13.1", "10.77.13.2"


class Namespaces:
    """Create, shape and delete the namespace pair (root only; names carry our PID so runs never collide)."""

    def __init__(self, rate: str) -> None:
        tag = os.getpid() % 100000
        self.c, self.s = f"pc{tag}", f"ps{tag}"
        vc, vs = f"pvc{tag}", f"pvs{tag}"
        cmds = [
            f"netns add {self.c}",
            f"netns add {self.s}",
            f"link add {vc} type veth peer name {vs}",
            f"link set {vc} netns {self.c}",
            f"link set {vs} netns {self.s}",
            f"-n {self.c} addr add {C_IP}/24 dev {vc}",
            f"-n {self.s} addr add {S_IP}/24 dev {vs}",
            f"-n {self.c} link set {vc} up",
            f"-n {self.s} link set {vs} up",
            f"-n {self.c} link set lo up",
            f"-n {self.s} link set lo up",
        ]
        try:
            for c in cmds:
                self._run(["ip", *c.split()])
            for ns, dev in ((self.c, vc), (self.s, vs)):
                self._run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        dev,
                        "root",
                        "tbf",
                        "rate",
                        rate,
                        "burst",
                        "64kb",
                        "latency",
                        "100ms",
                    ]
                )
        except RuntimeError:
            self.delete()
            raise

    @staticmethod
    def _run(argv: list[str]) -> None:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip()} (network namespaces and tc need root)")

    def prefix(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def delete(self) -> None:
        for ns in (self.c, self.s):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def link_run(
    arm: str, system: str, extra: list[str], link: str, server_cls: type[Server], sizes: Sizes, log: Log
) -> dict[str, Any]:
    rate, rtt_ms = LINKS[link]
    ns = Namespaces(rate)
    server: Server | None = None
    relay: procs.Proc | None = None
    try:
        server = server_cls(system, 0.02, host=S_IP, prefix=ns.prefix(ns.s))
        host, port = (server.endpoint.split("/", 1)[1] if system == "ours" else server.targets[0]).rsplit(":", 1)
        relay = procs.python(
            "bench.peers.relay",
            "--target",
            f"{host}:{port}",
            "--delay-ms",
            str(rtt_ms / 2),
            name="delay relay",
            prefix=ns.prefix(ns.c),
        )
        rport = relay.wait_for("RELAY READY", 60).split()[-1]
        target = f"tcp/127.0.0.1:{rport}" if system == "ours" else f"127.0.0.1:{rport}"
        lat = procs.client(
            system,
            target,
            "--warmup",
            "0",
            "--requests",
            str(sizes.link_requests),
            "--timeout",
            "60",
            *extra,
            prefix=ns.prefix(ns.c),
        )
        robot = procs.python(
            "bench.peers.robot_loop",
            system,
            "--target",
            target,
            "--seconds",
            str(sizes.scale_seconds * 2),
            *extra,
            name="robot",
            prefix=ns.prefix(ns.c),
        )
        res = procs.result(robot.wait_for("PEER RESULT", timeout=300))
        robot.stop()
    finally:
        if relay is not None:
            relay.stop()
        if server is not None:
            server.stop()
        ns.delete()
    run_s = res["ended"] - (res["first_chunk"] or res["ended"])
    dry = len(res["dry_ticks"])
    lags = [b - a for a, b in res["chunks"]]
    row = {
        "arm": arm,
        "link": link,
        "ttfc_s": res["first_chunk"] - res["started"] if res["first_chunk"] else None,
        "rtt_p50_ms": lat["rtt_p50_ms"],
        "rtt_p99_ms": lat["rtt_p99_ms"],
        "first_rtt_ms": lat.get("first_rtt_ms"),
        "errors": lat["errors"],
        "dry_fraction": dry / max(1, run_s * 30),
        "dry_ticks": dry,
        "robot_seconds": run_s,
        "chunk_p50_ms": pct(lags, 50) * 1000,
        "robot_errors": len(res["errors"]),
        "robot_error_samples": [e[1] if isinstance(e, (list, tuple)) else str(e) for e in res["errors"][:3]],
    }
    log(
        f"link {arm:12s} {link:13s} first chunk {row['ttfc_s'] or float('nan'):5.2f}s  "
        f"rtt p50 {row['rtt_p50_ms']:7.1f} p99 {row['rtt_p99_ms']:7.1f} ms  "
        f"queue dry {100 * row['dry_fraction']:5.1f}% of ticks  errors {row['errors']}/{row['robot_errors']}"
    )
    return row


def links(
    arms: list[str], arm_table: dict[str, tuple[str, list[str]]], server_cls: type[Server], sizes: Sizes, log: Log
) -> list[dict[str, Any]]:
    # a same-host arm has no link to shape: its frames would pass over shared memory, not the namespaces' veth
    cross = [a for a in arms if "--shm" not in arm_table[a][1]]
    return [link_run(arm, *arm_table[arm], link, server_cls, sizes, log) for link in LINKS for arm in cross]
