"""Reproduce every side-by-side table and plot: `python -m bench.peers.run [--quick] [--out DIR]`.

Phases: `latency` (round trip minus S, bytes, CPU, req/s for S in {0, 20, 100} ms), `scaling`
(N robots against one server of each system; legacy's one-server-per-robot alternative with memory),
`act` (a small real ACT), `vla` (pi0, tiny on CPU or the stock size on a GPU: ours with RTC, the openpi/GR00T-style
servers without, as their protocols carry no prefix; bench.peers.vla), `faults` (kill+restart, SIGSTOP, partition;
bench.peers.faults) and `link` (tc tbf + delay relay between network namespaces; bench.peers.link).
`--phases vla --quick` is the smoke test's size of the vla phase.
Results go to DIR/results.json; `bench.peers.report` turns them into tables and PNGs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import procs
from .relay import Relay
from .workload import Log, Sizes, interleaved, proc_cpu_s, proc_rss_mb

ARMS = {  # arm -> (system, extra client args)
    "ours-jpeg": ("ours", ["--quality", "90"]),
    "ours-raw": ("ours", ["--quality", "0"]),
    # robot and server on one machine with the product's defaults: shared memory on, so the robot sends raw frames
    "ours-samehost": ("ours", ["--quality", "90", "--shm"]),
    # the vla phase's robot without real-time chunking (the peers' protocols carry no prefix): RTC's own cost apart
    "ours-nortc": ("ours", ["--quality", "90", "--no-rtc"]),
    "legacy-grpc": ("legacy", []),
    "openpi-ws": ("openpi", []),
    "openpi-ws-224": ("openpi", ["--resize", "224"]),  # openpi's docs: resize_with_pad to 224x224 on the robot
    "gr00t-zmq": ("gr00t", []),
    # ours with the compiled pass turned off: the eager row beside the default (compiled on CUDA, `model.compile`)
    "ours-eager": ("ours", ["--quality", "90"]),
}
SERVER_COMPILE = {"ours-eager": "off"}  # arm -> the server's model.compile (default: auto)
VLA_ARMS = [
    "ours-jpeg",
    "ours-nortc",
    "openpi-ws",
    "gr00t-zmq",
]  # the systems that can serve a lerobot VLA (legacy: not measured here)
VLA_READY_S = 900  # a stock-size pi0 (about 14 GB in float32) loads for minutes


def act_device(path: str) -> str:
    """The device the checkpoint was saved for (`--device`): every system loads it there."""
    return str(json.loads((Path(path) / "config.json").read_text()).get("device") or "cpu")


class Server:
    """One server of a system (and, for ours, its router); `target` is what clients connect to."""

    def __init__(
        self,
        system: str,
        sleep_s: float,
        count: int = 1,
        host: str = "127.0.0.1",
        prefix: list[str] | None = None,
        act: str = "",
        shm: bool = False,
        vla: str = "",
        wait: bool = True,
        compile_choice: str = "auto",
    ) -> None:
        self.system, self.sleep_s, self.host, self.prefix = system, sleep_s, host, prefix
        self.router: procs.Proc | None = None
        self.procs: list[procs.Proc] = []
        self.act, self.shm, self.vla, self.compile_choice = act, shm, vla, compile_choice
        self.path = ""  # appended to the servers' PYTHONPATH: the tiny pi0 hook's site for a tiny checkpoint
        if vla:
            from .vla import pythonpath

            self.path = pythonpath(vla)
        if system == "ours":
            self.router, self.endpoint = procs.router(prefix=prefix, host=host)
            self.targets = [self.endpoint]
        else:
            self.targets = [f"{host}:{procs.free_port()}" for _ in range(count)]
        self.launch()
        if wait:
            self.ready()

    def start(self) -> float:
        """Start (or restart, on the same ports and router) every server; returns when all are ready."""
        self.launch()
        return self.ready()

    def ready(self) -> float:
        """Wait until every launched server says it serves (a VLA loads for minutes); returns when."""
        for p in self.procs:
            p.wait_for(self.ready_line, timeout=VLA_READY_S if self.vla else 300 if self.act else 180)
        return time.monotonic()

    def launch(self) -> None:
        """Start every server's process without waiting for it (several servers load their models at once)."""
        s = str(self.sleep_s)
        model = self.act or self.vla
        if (
            self.system == "ours" and model
        ):  # the real product CLI with a manifest (RTC offered and batching: its defaults)
            from .vla import TASK

            # one manifest per server: servers of the same model launch together, each on its own router
            manifest = Path(model) / f"peers-manifest-{self.endpoint.rsplit(':', 1)[-1]}.yaml"
            manifest.write_text(
                json.dumps(
                    {
                        "model": {
                            "repo_or_path": model,
                            "device": act_device(model),
                            "compile": self.compile_choice,
                            "compile_buckets": [1, 4, 8],
                        },
                        "default_task": TASK if self.vla else "peers act",
                        "max_sessions": 16,
                        "warmup_inferences": 1,
                        "health_port": 0,
                        "zenoh": {"mode": "client", "connect_endpoints": [self.endpoint], "shared_memory": self.shm},
                    }
                )
            )
            self.procs = [
                procs.Proc(
                    [str(procs.BIN / "lerobot-policy-server"), "--manifest", str(manifest)],
                    name="lerobot-policy-server",
                    prefix=self.prefix,
                    max_s=procs.SERVER_MAX_S,
                    path=self.path,
                )
            ]
            self.ready_line = "Policy server up"
            return
        act = ["--act", self.act] if self.act else ["--vla", self.vla] if self.vla else []
        if self.system == "ours":
            argvs = [["ours", "--endpoint", self.endpoint, "--sleep", s, *(["--shm"] if self.shm else [])]]
        else:
            argvs = [
                [self.system, "--host", t.rsplit(":", 1)[0], "--port", t.rsplit(":", 1)[1], "--sleep", s]
                for t in self.targets
            ]
        self.procs = [
            procs.python(
                "bench.peers.serve",
                *a,
                *act,
                name=f"{self.system} server",
                prefix=self.prefix,
                max_s=procs.SERVER_MAX_S,
                path=self.path,
            )
            for a in argvs
        ]
        self.ready_line = "PEER READY"

    @property
    def target(self) -> str:
        return ",".join(self.targets)

    def pid_args(self) -> list[str]:
        return [a for p in self.procs for a in ("--server-pid", str(p.pid))]

    def rss_mb(self) -> float:
        return sum(proc_rss_mb(p.pid) for p in self.procs)

    def relay(self) -> tuple[Relay, str]:
        if self.system == "ours":
            host, port = self.endpoint.split("/", 1)[1].rsplit(":", 1)
            r = Relay((host, int(port)))
            return r, f"tcp/127.0.0.1:{r.port}"
        host, port = self.targets[0].rsplit(":", 1)
        r = Relay((host, int(port)))
        return r, f"127.0.0.1:{r.port}"

    def stop(self) -> None:
        for p in self.procs:
            p.stop()
        if self.router is not None:
            self.router.stop()


def wire_bytes(server: Server, system: str, extra: list[str]) -> tuple[float, float]:
    """Bytes per request and per reply on the TCP link, by difference of two runs (setup cancels out)."""
    counts = []
    for n in (3, 13):
        relay, target = server.relay()
        try:
            procs.client(system, target, "--warmup", "0", "--requests", str(n), *extra)
            time.sleep(0.3)  # let the last reply and any close frames pass the relay
            counts.append((relay.up, relay.down))
        finally:
            relay.stop()
    (u1, d1), (u2, d2) = counts
    return (u2 - u1) / 10, (d2 - d1) / 10


def idle_cpu_pct(servers: list[Server], seconds: float = 2.0) -> float:
    """CPU the idle servers of the other arms use while one arm is measured (% of one core): the price of
    interleaving."""
    pids = [p.pid for s in servers for p in [*s.procs, *([s.router] if s.router is not None else [])]]
    c0 = sum(proc_cpu_s(p) for p in pids)
    time.sleep(seconds)
    return 100 * (sum(proc_cpu_s(p) for p in pids) - c0) / seconds


@contextlib.contextmanager
def servers_up(
    arms: list[str], sleep_s: float, act: str, phase: str, repeats: int, log: Log, vla: str = ""
) -> Iterator[tuple[dict[str, Server], float]]:
    """Every arm's server at once (launched together, so their models load side by side; stopped on the way out),
    and what they cost idle, logged."""
    with contextlib.ExitStack() as stack:
        servers: dict[str, Server] = {}
        for arm in arms:
            system, extra = ARMS[arm]
            servers[arm] = Server(
                system,
                sleep_s,
                act=act,
                shm="--shm" in extra,
                vla=vla,
                wait=False,
                compile_choice=SERVER_COMPILE.get(arm, "auto"),
            )
            stack.callback(servers[arm].stop)
        for server in servers.values():
            server.ready()
        idle = idle_cpu_pct(list(servers.values()))
        log(f"{phase}: {len(servers)} servers up, idle CPU {idle:.1f} % of a core; up to {repeats} interleaved repeats")
        yield servers, idle


def closed_loop(servers: dict[str, Server], *args: str, arm: str, max_s: float = 600) -> dict[str, Any]:
    """One measuring client of `arm` against its server."""
    system, extra = ARMS[arm]
    return procs.client(system, servers[arm].target, *args, *servers[arm].pid_args(), *extra, max_s=max_s)


def summarize(row: dict[str, Any], reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of the repeats for each figure, with its min-max spread."""
    row["repeats"] = reps
    for key in ("rtt_p50_ms", "rtt_p99_ms", "client_cpu_ms", "server_cpu_ms", "req_per_s"):
        vals = [r[key] for r in reps]
        row[key] = statistics.median(vals)
        row[key + "_spread"] = [min(vals), max(vals)]
    row["errors"] = sum(r["errors"] for r in reps)
    row["resends"] = sum(r.get("resends", 0) for r in reps)
    return row


def latency(sizes: Sizes, sleeps: list[float], arms: list[str], log: Log) -> list[dict[str, Any]]:
    rows = []
    for s in sleeps:
        with servers_up(arms, s, "", f"latency S={s * 1000:.0f}ms", sizes.latency_repeats, log) as (servers, idle):
            reps = interleaved(
                arms,
                sizes.latency_repeats,
                functools.partial(
                    closed_loop, servers, "--warmup", str(sizes.warmup), "--requests", str(sizes.requests)
                ),
            )
            for arm in arms:
                system, extra = ARMS[arm]
                up, down = wire_bytes(servers[arm], system, extra)
                row = summarize(
                    {
                        "arm": arm,
                        "sleep_ms": s * 1000,
                        "up_bytes": up,
                        "down_bytes": down,
                        "server_rss_mb": servers[arm].rss_mb(),
                        "idle_cpu_pct": idle,
                    },
                    reps[arm],
                )
                row["over_p50_ms"], row["over_p99_ms"] = row["rtt_p50_ms"] - s * 1000, row["rtt_p99_ms"] - s * 1000
                log(
                    f"latency {arm:12s} S={s * 1000:4.0f}ms  "
                    f"over p50 {row['over_p50_ms']:7.1f} p99 {row['over_p99_ms']:7.1f} ms  "
                    f"up {up / 1e3:8.1f} kB down {down / 1e3:6.1f} kB  "
                    f"cpu c/s {row['client_cpu_ms']:5.1f}/{row['server_cpu_ms']:5.1f} ms  "
                    f"{row['req_per_s']:6.1f} req/s  errors {row['errors']}  resends {row['resends']}"
                )
                rows.append(row)
    return sorted(rows, key=lambda r: (arms.index(r["arm"]), r["sleep_ms"]))


def act_rows(
    sizes: Sizes, arms: list[str], out: Path, ns: list[int], log: Log, device: str = "cpu"
) -> list[dict[str, Any]]:
    """The small real ACT on `device`, same checkpoint everywhere: round trip, CPU, req/s at N robots (interleaved
    repeats)."""
    from .act import save_act

    path = save_act(out / "act-checkpoint", device=device)
    rows = []
    for n in ns:
        # one robot's round trip is a latency row: as noisy on a small VM as the loopback ones (sizes.latency_repeats)
        repeats = sizes.latency_repeats if n == 1 else sizes.repeats
        with servers_up(arms, 0.0, str(path), f"act N={n}", repeats, log) as (servers, idle):
            reps = interleaved(
                arms,
                repeats,
                functools.partial(
                    closed_loop,
                    servers,
                    "--robots",
                    str(n),
                    "--warmup",
                    str(max(1, sizes.warmup // 5)),
                    "--requests",
                    str(sizes.act_requests),
                    "--act",
                    str(path),
                    "--timeout",
                    "120",
                    max_s=900,
                ),
            )
            for arm in arms:
                r = summarize(
                    {
                        "arm": arm,
                        "n": n,
                        "device": device,
                        "server_rss_mb": servers[arm].rss_mb(),
                        "idle_cpu_pct": idle,
                    },
                    reps[arm],
                )
                log(
                    f"act     {arm:12s} N={n}  rtt p50 {r['rtt_p50_ms']:7.1f} p99 {r['rtt_p99_ms']:7.1f} ms  "
                    f"cpu c/s {r['client_cpu_ms']:6.1f}/{r['server_cpu_ms']:6.1f} ms  {r['req_per_s']:5.2f} req/s  "
                    f"rss {r['server_rss_mb']:5.0f} MB  errors {r['errors']}"
                )
                rows.append(r)
    return sorted(rows, key=lambda r: (arms.index(r["arm"]), r["n"]))


def vla_rows(
    sizes: Sizes, arms: list[str], out: Path, ns: list[int], log: Log, device: str = "cpu", size: str = "tiny"
) -> list[dict[str, Any]]:
    """pi0 on `device`, the same checkpoint everywhere: round trip, chunks/s at N robots (interleaved repeats). Ours
    serves it with RTC (each robot's request carries its prefix) and batching, as by default; the peers run
    `predict_action_chunk` without RTC, as their servers do. Each row of ours also carries ours / the best peer at that
    N."""
    from .vla import info, save_pi0

    path = save_pi0(out / f"pi0-{size}-checkpoint", size=size, device=device)
    model = info(path)
    log(
        f"vla: pi0 {size} ({model['parameters'] / 1e6:.1f} M parameters, "
        f"{model['image']}x{model['image']} images) on {device}"
    )
    rows = []
    # one set of servers for every N: a stock-size pi0 loads for minutes
    with servers_up(arms, 0.0, "", f"vla N={ns}", max(sizes.repeats, sizes.latency_repeats), log, vla=str(path)) as (
        servers,
        idle,
    ):
        for n in ns:
            repeats = sizes.latency_repeats if n == 1 else sizes.repeats
            log(f"vla N={n}: {repeats} interleaved repeats")
            reps = interleaved(
                arms,
                repeats,
                functools.partial(
                    closed_loop,
                    servers,
                    "--robots",
                    str(n),
                    "--warmup",
                    str(max(1, sizes.warmup // 5)),
                    "--requests",
                    str(sizes.vla_requests),
                    "--vla",
                    "--timeout",
                    "120",
                    max_s=900,
                ),
            )
            group = []
            for arm in arms:
                ours = ARMS[arm][0] == "ours"
                r = summarize(
                    {
                        "arm": arm,
                        "n": n,
                        "device": device,
                        "size": size,
                        "parameters": model["parameters"],
                        "server_rss_mb": servers[arm].rss_mb(),
                        "idle_cpu_pct": idle,
                    },
                    reps[arm],
                )
                r["chunks_s"] = r["req_per_s"]
                r["wrong_chunks"] = sum(x["wrong_chunks"] for x in reps[arm])
                r["rtc_prefixed"] = sum(x.get("rtc_prefixed", 0) for x in reps[arm])
                r["rtc"] = (
                    "prefix per robot"
                    if ours and r["rtc_prefixed"]
                    else "none (no prefix in its protocol)"
                    if not ours
                    else "off"
                )
                if ours:
                    last = reps[arm][-1]
                    r.update(
                        server_max_batch=last.get("server_max_batch"), server_batch_mean=last.get("server_batch_mean")
                    )
                log(
                    f"vla     {arm:12s} N={n}  rtt p50 {r['rtt_p50_ms']:7.1f} p99 {r['rtt_p99_ms']:7.1f} ms  "
                    f"{r['chunks_s']:6.2f} chunks/s  "
                    f"cpu c/s {r['client_cpu_ms']:6.1f}/{r['server_cpu_ms']:6.1f} ms  "
                    f"rss {r['server_rss_mb']:5.0f} MB  RTC {r['rtc']}"
                    + (
                        f" ({r['rtc_prefixed']} requests with a prefix, max_batch {r['server_max_batch']}, "
                        f"mean batch {r['server_batch_mean'] or 0:.2f})"
                        if ours
                        else ""
                    )
                    + f"  errors {r['errors']}  wrong {r['wrong_chunks']}"
                )
                group.append(r)
            vs_best_peer(group, log)
            rows += group
    return sorted(rows, key=lambda r: (arms.index(r["arm"]), r["n"]))


def vs_best_peer(group: list[dict[str, Any]], log: Log) -> None:
    """On each of our rows: ours / the best peer at that N (the lowest round trip, the most chunks/s)."""
    peers = [r for r in group if ARMS[r["arm"]][0] != "ours"]
    if not peers:
        return
    best50, best99 = min(peers, key=lambda r: r["rtt_p50_ms"]), min(peers, key=lambda r: r["rtt_p99_ms"])
    best_cps = max(peers, key=lambda r: r["chunks_s"])
    for r in group:
        if ARMS[r["arm"]][0] == "ours":
            r["vs_best_peer"] = {
                "rtt_p50": r["rtt_p50_ms"] / best50["rtt_p50_ms"],
                "rtt_p50_peer": best50["arm"],
                "rtt_p99": r["rtt_p99_ms"] / best99["rtt_p99_ms"],
                "rtt_p99_peer": best99["arm"],
                "chunks_s": r["chunks_s"] / best_cps["chunks_s"] if best_cps["chunks_s"] else float("nan"),
                "chunks_s_peer": best_cps["arm"],
            }
            v = r["vs_best_peer"]
            log(
                f"vla     {r['arm']:12s} N={r['n']}  ours / best peer: "
                f"rtt p50 {v['rtt_p50']:.2f} ({v['rtt_p50_peer']}), "
                f"p99 {v['rtt_p99']:.2f} ({v['rtt_p99_peer']}), chunks/s {v['chunks_s']:.2f} ({v['chunks_s_peer']})"
            )


def jain(xs: list[float]) -> float:
    return (sum(xs) ** 2) / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def scaling(
    sizes: Sizes, ns: list[int], sleep_s: float, arms: list[str], legacy_procs_max: int, log: Log
) -> list[dict[str, Any]]:
    rows = []
    plans = [(arm, ARMS[arm][0], ARMS[arm][1], "one server") for arm in arms]
    if "legacy-grpc" in arms:
        plans.append(("legacy-grpc", "legacy", [], "one server per robot"))
    for arm, system, extra, mode in plans:
        for n in ns:
            if mode == "one server per robot" and n > legacy_procs_max:
                continue
            server = Server(system, sleep_s, count=n if mode == "one server per robot" else 1, shm="--shm" in extra)
            try:
                rss = server.rss_mb()
                r = procs.client(
                    system,
                    server.target,
                    "--robots",
                    str(n),
                    "--seconds",
                    str(sizes.scale_seconds),
                    "--timeout",
                    "5",
                    *server.pid_args(),
                    *extra,
                    max_s=300 + 30 * n,
                )
                rss = max(rss, server.rss_mb())
            finally:
                server.stop()
            r.update(
                arm=arm, mode=mode, n=n, sleep_ms=sleep_s * 1000, jain=jain(r["per_robot_req_s"]), server_rss_mb=rss
            )
            log(
                f"scaling {arm:12s} {mode:20s} N={n:2d}  {r['req_per_s']:6.1f} req/s  "
                f"p50 {r['rtt_p50_ms']:7.1f} p99 {r['rtt_p99_ms']:7.1f} ms  "
                f"Jain {r['jain']:.2f}  errors {r['errors']}  wrong {r['wrong_chunks']}  rss {rss:6.0f} MB"
            )
            rows.append(r)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a few requests per system (the smoke test's size)")
    ap.add_argument("--out", default="bench/peers/out")
    ap.add_argument("--phases", nargs="*", default=["latency", "scaling", "act", "vla", "faults", "link"])
    ap.add_argument("--act-n", nargs="*", type=int, default=[1, 4], help="robots per server for the ACT rows")
    ap.add_argument(
        "--act-device", default="cpu", help="where every system runs the ACT rows' model (cuda on a GPU box)"
    )
    ap.add_argument("--vla-n", nargs="*", type=int, default=[1, 4], help="robots per server for the vla rows")
    ap.add_argument("--vla-device", default="cpu", help="where every system runs the vla rows' pi0 (cuda on a GPU box)")
    ap.add_argument(
        "--vla-size",
        choices=["tiny", "full"],
        default=None,
        help=(
            "pi0's size: tiny (the test kit's hook) or full (stock gemma_2b + gemma_300m); "
            "default tiny on cpu, full on cuda"
        ),
    )
    ap.add_argument("--vla-arms", nargs="*", default=VLA_ARMS, choices=list(ARMS), help="the systems of the vla rows")
    ap.add_argument("--arms", nargs="*", default=list(ARMS))
    ap.add_argument("--sleeps-ms", nargs="*", type=float, default=[0, 20, 100])
    ap.add_argument("--n", nargs="*", type=int, default=[1, 2, 4, 8, 16])
    ap.add_argument("--scale-sleep-ms", type=float, default=20)
    ap.add_argument(
        "--legacy-procs-max", type=int, default=4, help="largest N for legacy's one-server-per-robot run (memory)"
    )
    ap.add_argument(
        "--faults", nargs="*", default=["kill", "sigstop", "partition"], help="which faults the faults phase runs"
    )
    ap.add_argument(
        "--kill-window", type=float, default=30.0, help="seconds the robot runs after the kill (slow peers need 30)"
    )
    ap.add_argument(
        "--kill-trials",
        type=int,
        default=None,
        help="trials of the kill fault, the row their median (default 3; 1 with --quick)",
    )
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.kill_trials is not None:
        sizes = dataclasses.replace(sizes, kill_trials=args.kill_trials)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()

    def log(text: str) -> None:
        print(f"[{time.monotonic() - t0:6.0f}s] {text}", flush=True)

    results: dict[str, Any] = {
        "sizes": sizes.__dict__,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "nproc": os.cpu_count(),
    }

    def save(phase: str, rows: list[dict[str, Any]]) -> None:  # after each phase: a crash later keeps what was measured
        results[phase] = rows
        results["duration_s"] = time.monotonic() - t0
        (out / "results.json").write_text(json.dumps(results, indent=1))

    def load(phase: str) -> None:  # a figure taken on a loaded box is not a figure: say what the box was doing
        one, five, fifteen = os.getloadavg()
        results.setdefault("load_before", {})[phase] = [one, five, fifteen]
        log(f"phase {phase}: load average {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)")

    if "latency" in args.phases:
        load("latency")
        save("latency", latency(sizes, [s / 1000 for s in args.sleeps_ms], args.arms, log))
    if "scaling" in args.phases:
        load("scaling")
        save("scaling", scaling(sizes, args.n, args.scale_sleep_ms / 1000, args.arms, args.legacy_procs_max, log))
    if "act" in args.phases:
        load("act")
        save("act", act_rows(sizes, args.arms, out, args.act_n, log, args.act_device))
    if "vla" in args.phases:
        load("vla")
        size = args.vla_size or ("tiny" if args.vla_device == "cpu" else "full")
        save("vla", vla_rows(sizes, args.vla_arms, out, args.vla_n, log, args.vla_device, size))
    if "faults" in args.phases:
        load("faults")
        from .faults import faults

        save("faults", faults(args.arms, ARMS, Server, log, tuple(args.faults), args.kill_window, sizes.kill_trials))
    if "link" in args.phases:
        load("link")
        from .link import links

        save("link", links(args.arms, ARMS, Server, sizes, log))
    results["duration_s"] = time.monotonic() - t0
    (out / "results.json").write_text(json.dumps(results, indent=1))
    log(f"wrote {out / 'results.json'} ({results['duration_s'] / 60:.1f} min)")
    if not args.no_report:
        from .report import write_report

        write_report(results, out)
        log(f"wrote tables and plots under {out}")


if __name__ == "__main__":
    main()
