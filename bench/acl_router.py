"""What the router's access control costs: pub/sub round trips through an mTLS router, with and without the ACL.

Three router setups, side by side in one run, each a real `lerobot-fleet router` process on loopback:
  mtls       --tls-* only (reference)
  acl        --tls-* --inventory (the ACL plus the refusal log, which needs zenoh's TRACE access-control log)
  acl-quiet  the same with RUST_LOG=warn (the ACL without the refusal log), to separate the two costs
A robot session (CN arm-a) publishes 1 KB on its observation key; a server session (CN rep-1) echoes it on
the robot's action key; the robot times the round trip. Shared memory off (a cross-host path).

    .venv/bin/python bench/acl_router.py [--n 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from lerobot_fleet.router.inventory import NamespaceGrant
from lerobot_fleet.router.pki import init_ca, issue

from lerobot_policy_remote.wire import ServiceKeys
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

BIN = Path(sys.executable).parent
KEYS = ServiceKeys.for_service("bench/model", "main", "acl bench")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_router(pki: Path, acl: bool, quiet: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    endpoint = f"tls/127.0.0.1:{port}"
    argv = [
        str(BIN / "lerobot-fleet"),
        "router",
        "--no-rollouts",
        "--listen",
        endpoint,
        "--tls-cert",
        str(pki / "router-a.crt"),
        "--tls-key",
        str(pki / "router-a.key"),
        "--tls-ca",
        str(pki / "ca.crt"),
    ]
    if acl:
        argv += ["--inventory", str(pki / "inventory.yaml")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if quiet:
        env["RUST_LOG"] = "warn"
    proc = subprocess.Popen(
        ["timeout", "-s", "KILL", "600", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "Zenoh router up" in line:
            break
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # keep the pipe drained
    return proc, endpoint


def client(pki: Path, endpoint: str, name: str):
    return open_session(
        ZenohSettings(
            mode="client",
            connect_endpoints=[endpoint],
            shared_memory=False,
            tls_root_ca_certificate=str(pki / "ca.crt"),
            tls_connect_certificate=str(pki / f"{name}.crt"),
            tls_connect_private_key=str(pki / f"{name}.key"),
        )
    )


def measure(pki: Path, endpoint: str, n: int) -> list[float]:
    import zenoh
    from zenoh.handlers import FifoChannel

    robot, server = client(pki, endpoint, "arm-a"), client(pki, endpoint, "rep-1")
    try:
        action_key = KEYS.robot("arm-a", "action")
        pub_back = server.declare_publisher(action_key, express=True)
        echo = server.declare_subscriber(KEYS.obs("rep-1", "*"), lambda s: pub_back.put(s.payload.to_bytes()))
        inbox = robot.declare_subscriber(action_key, FifoChannel(16))
        pub = robot.declare_publisher(
            KEYS.obs("rep-1", "arm-a"), express=True, congestion_control=zenoh.CongestionControl.BLOCK
        )
        payload = b"x" * 1024
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # warm up until the route exists
            pub.put(payload)
            time.sleep(0.05)
            if inbox.try_recv() is not None:
                break
        while inbox.try_recv() is not None:
            pass
        rtts = []
        for _ in range(n):
            t0 = time.perf_counter()
            pub.put(payload)
            inbox.recv()
            rtts.append((time.perf_counter() - t0) * 1e6)
        for d in (pub, inbox, echo, pub_back):
            d.undeclare()
        return rtts
    finally:
        robot.close()
        server.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pki = Path(tmp)
        init_ca(pki)
        for name, role in (("router-a", "router"), ("arm-a", "robot"), ("rep-1", "server")):
            issue(pki, name, role, namespaces=[NamespaceGrant()] if role == "server" else None)
        setups = {"mtls": (False, False), "acl": (True, False), "acl-quiet": (True, True)}
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in setups}
        for r in range(args.rounds):
            for name, (acl, quiet) in setups.items():  # interleaved: machine noise hits every setup alike
                proc, endpoint = start_router(pki, acl, quiet)
                try:
                    rtts = sorted(measure(pki, endpoint, args.n))
                finally:
                    proc.terminate()
                    proc.wait(timeout=15)
                p50, p99 = rtts[len(rtts) // 2], rtts[int(len(rtts) * 0.99)]
                results[name].append((p50, p99))
                print(f"round {r + 1} {name:<10} p50 {p50:7.0f} us  p99 {p99:7.0f} us", flush=True)
        ref = statistics.median(p for p, _ in results["mtls"])
        print("\nsetup       p50 median (min-max) us     p99 median us   p50 ratio to mtls")
        for name, rows in results.items():
            p50s = [p for p, _ in rows]
            p99s = [q for _, q in rows]
            med = statistics.median(p50s)
            print(
                f"{name:<10} {med:7.0f} ({min(p50s):.0f}-{max(p50s):.0f}) "
                f"{statistics.median(p99s):14.0f} {med / ref:15.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
