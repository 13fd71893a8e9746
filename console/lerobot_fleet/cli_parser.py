"""`lerobot-fleet`'s command line: every subcommand and its options (argparse only, so `--help` is instant)."""

from __future__ import annotations

import argparse

from lerobot_fleet.sim.demo_args import add_demo
from lerobot_fleet.verbs.rollout_args import add_rollout

DEFAULT_ROUTER = "tcp/127.0.0.1:7447"


def _add_connect(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--router",
        action="append",
        default=None,
        help=f"router endpoint to connect to (repeatable); default {DEFAULT_ROUTER}",
    )
    p.add_argument("--tls-ca", default=None, help="CA (PEM) that signed the router certificate (for tls/ endpoints)")
    p.add_argument("--tls-cert", default=None, help="client certificate (PEM) for mTLS")
    p.add_argument("--tls-key", default=None, help="client private key (PEM) for mTLS")
    p.add_argument("--zenoh-config", default=None, help="extra zenoh config: a JSON5 file or inline text, merged last")


def _add_alerts(p: argparse.ArgumentParser) -> None:
    """Alert thresholds (defaults in lerobot_fleet.data.alerts.AlertRules); 0 turns a rule off."""
    g = p.add_argument_group(
        "alerts", "thresholds: defaults, then --alerts-config (TOML or JSON, same names), then these flags"
    )
    g.add_argument(
        "--alerts-config",
        default=None,
        metavar="FILE",
        help=(
            "TOML/JSON with staleness_s, staleness_of_bound, staleness_default_s, staleness_samples, fault_s, "
            "error_rate, rtt_p95_ms, server_load, namespace_drops"
        ),
    )
    g.add_argument(
        "--alert-staleness",
        type=float,
        default=None,
        metavar="S",
        help=(
            "robot action staleness, one fixed threshold for every robot "
            "(default: 2/3 of each robot's max_action_age_s, 2 s when it does not report it)"
        ),
    )
    g.add_argument("--alert-fault", type=float, default=None, metavar="S", help="time in a fault state (default 10 s)")
    g.add_argument(
        "--alert-error-rate", type=float, default=None, metavar="FRACTION", help="robot errors/requests (default 0.05)"
    )
    g.add_argument("--alert-rtt-p95", type=float, default=None, metavar="MS", help="robot RTT p95 (default 500 ms)")
    g.add_argument("--alert-load", type=float, default=None, metavar="LOAD", help="server load 0..1 (default 0.9)")
    g.add_argument(
        "--alert-namespace-drops",
        type=float,
        default=None,
        metavar="N",
        help="samples of one robot id dropped for being in more namespaces than the console admits per id (default 1)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lerobot-fleet", description="Operate a fleet of remote-inference robots.")
    sub = parser.add_subparsers(dest="command", required=True)

    router = sub.add_parser(
        "router",
        help="run an embedded Zenoh router (laptops, tests, the demo)",
        description="Run a Zenoh router that robots, policy servers and consoles connect to. With "
        "--tls-cert/--tls-key/--tls-ca it speaks mTLS; with --inventory it enforces the access control "
        "(docs/security.md). Runs until Ctrl-C or SIGTERM.",
    )
    router.add_argument(
        "--listen", action="append", default=None, help="endpoint to listen on (repeatable); default tcp/127.0.0.1:7447"
    )
    router.add_argument(
        "--config", default=None, help="extra router config: a JSON5 file (TLS, ACL, ...) merged key by key"
    )
    router.add_argument("--tls-cert", default=None, help="router certificate (PEM) for tls/ endpoints")
    router.add_argument("--tls-key", default=None, help="router private key (PEM)")
    router.add_argument("--tls-ca", default=None, help="CA (PEM) that client certificates must chain to: enables mTLS")
    router.add_argument(
        "--inventory",
        default=None,
        metavar="FLEET.yaml",
        help="fleet inventory: generate and enforce the access control (default deny, by certificate CN; needs mTLS)",
    )
    router.add_argument(
        "--connect",
        action="append",
        default=None,
        metavar="ENDPOINT",
        help="another router to mesh with (repeatable), e.g. tls/router-b:7447",
    )
    router.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --listen without --inventory (no access control: any client may act as any "
        "robot or server); warns at start and every minute",
    )
    router.add_argument(
        "--print-acl", action="store_true", help="print the access_control config generated from --inventory and exit"
    )
    router.add_argument(
        "--rollout-state",
        default=None,
        metavar="FILE",
        help="where this router keeps the fleet's model rollout (`lerobot-fleet rollout`); default beside "
        "--inventory (FLEET.rollout.json), else ~/.local/state/lerobot-fleet/rollout-<listen>.json",
    )
    router.add_argument(
        "--no-rollouts",
        action="store_true",
        help="do not keep rollouts here (in a mesh, one router keeps them: give the others this flag)",
    )

    pki = sub.add_parser(
        "pki",
        help="a development PKI: CA, certificates, inventory",
        description="Make a CA and "
        "certificates for mTLS; every certificate issued is recorded with its role in DIR/inventory.yaml.",
    )
    pki_sub = pki.add_subparsers(dest="pki_command", required=True)
    pki_init = pki_sub.add_parser(
        "init", help="create DIR/ca.crt and DIR/ca.key", description="Create a development CA in DIR."
    )
    pki_init.add_argument("dir", help="the PKI directory (created if missing)")
    pki_init.add_argument("--days", type=int, default=3650, help="CA validity in days (default 3650)")
    pki_init.add_argument(
        "--force", action="store_true", help="replace an existing CA (every old certificate stops working)"
    )
    pki_issue = pki_sub.add_parser(
        "issue",
        help="create DIR/NAME.crt and DIR/NAME.key signed by the CA in DIR",
        description="Issue a certificate signed by the CA in DIR and record it with its role in "
        "DIR/inventory.yaml; prints the command that uses it.",
    )
    pki_issue.add_argument("dir", help="the PKI directory made by `lerobot-fleet pki init`")
    pki_issue.add_argument(
        "name", help="the common name: a robot's client_uuid, a server's replica id, a person or router name"
    )
    pki_issue.add_argument(
        "--role",
        required=True,
        choices=["router", "server", "robot", "operator", "viewer"],
        help="what the certificate is for; the router's access control grants by role (required)",
    )
    pki_issue.add_argument(
        "--host",
        action="append",
        default=None,
        help="router only: extra DNS name or IP on the certificate (repeatable)",
    )
    pki_issue.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    pki_issue.add_argument(
        "--namespace",
        action="append",
        default=None,
        metavar="model=M,service=S[,revision=R]",
        help="the namespace the certificate may use (repeatable; required for servers: a server may declare "
        "and answer only in its own; robots, operators and viewers default to every namespace)",
    )

    console = sub.add_parser(
        "console",
        help="the live operator console (Textual)",
        description="Live view of robots and policy servers; drain a server, reset a robot's episode.",
    )
    _add_connect(console)
    console.add_argument("--read-only", action="store_true", help="hide and disable drain and episode reset")
    console.add_argument(
        "--refresh", type=float, default=1.0, help="seconds between screen refreshes (min 0.1; default 1.0)"
    )
    console.add_argument(
        "--export-dir", default=".", help="where `x` (JSON) and `X` (CSV) write what is on screen (default: here)"
    )
    _add_alerts(console)
    console.add_argument(
        "--replay", default=None, metavar="FILE.jsonl", help="replay a recorded fleet instead of connecting (read-only)"
    )
    console.add_argument(
        "--replay-speed",
        type=float,
        default=1.0,
        help="replay pace multiplier (0 loads everything at once; default 1.0)",
    )
    console.add_argument("--fake", action="store_true", help="show a built-in fake fleet (demo, no router needed)")
    console.add_argument(
        "--record", default=None, metavar="FILE.jsonl", help="also write what the console sees to a replay file"
    )

    status = sub.add_parser(
        "status",
        help="print the fleet once (text or --json) and exit",
        description="Listen to the fleet for --wait seconds, then print its servers, robots and open alerts "
        "(text or --json) and exit: 0 connected, 2 not. --watch prints one JSON line per --interval.",
    )
    _add_connect(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument(
        "--wait",
        type=float,
        default=2.5,
        help="seconds to listen before printing (telemetry arrives ~1 Hz; default 2.5)",
    )
    status.add_argument(
        "--watch", action="store_true", help="keep printing: one JSON line per --interval (with alerts) until Ctrl-C"
    )
    status.add_argument("--interval", type=float, default=1.0, help="seconds between --watch lines (default 1.0)")
    status.add_argument("--count", type=int, default=0, help="--watch: stop after this many lines (0: never)")
    _add_alerts(status)

    drain = sub.add_parser(
        "drain",
        help="drain one policy server replica (no confirmation: for scripts)",
        description="Ask one policy server replica to drain: it takes no new sessions and its robots move to "
        "other replicas. Exit 0 when it acknowledged.",
    )
    _add_connect(drain)
    drain.add_argument("server", help="server replica id (as shown in the console's replica column)")
    drain.add_argument(
        "--reason", default="operator drain", help="recorded in the server's audit log (default 'operator drain')"
    )
    drain.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the acknowledgement (default 5)")
    drain.add_argument("--json", action="store_true", help="machine-readable output (one JSON object)")

    for verb, does in (
        ("cordon", "stop one policy server replica from admitting new sessions; its sessions keep streaming"),
        ("uncordon", "let a cordoned replica admit new sessions again"),
    ):
        cordon = sub.add_parser(
            verb,
            help=f"{does} (no confirmation: for scripts)",
            description=f"{does[0].upper()}{does[1:]}. New robots go to other replicas of the service. "
            "Operator certificates only. Exit 0 when it acknowledged.",
        )
        _add_connect(cordon)
        cordon.add_argument("server", help="server replica id (as shown in the console's replica column)")
        cordon.add_argument(
            "--reason", default=f"operator {verb}", help=f"recorded in the server's log (default 'operator {verb}')"
        )
        cordon.add_argument(
            "--timeout", type=float, default=5.0, help="seconds to wait for the acknowledgement (default 5)"
        )
        cordon.add_argument("--json", action="store_true", help="machine-readable output (one JSON object)")

    reset = sub.add_parser(
        "reset",
        help="start a new episode on one robot (no confirmation: for scripts)",
        description="Ask one robot to start a new episode. Exit 0 when it acknowledged.",
    )
    _add_connect(reset)
    reset.add_argument("robot", help="robot client_uuid (as shown in the console's robot column)")
    reset.add_argument(
        "--reason", default="operator episode reset", help="recorded by the robot (default 'operator episode reset')"
    )
    reset.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the acknowledgement (default 5)")
    reset.add_argument("--json", action="store_true", help="machine-readable output (one JSON object)")
    add_rollout(sub, _add_connect)
    doctor = sub.add_parser(
        "doctor",
        help="check that everything a rollout needs is in place (pass/fail lines with fixes)",
        description="Router reachable (TLS/mTLS with the given files), services, replicas and free sessions; "
        "with --policy.path, --robot.type and --task: a server for that namespace accepts this robot "
        "(dry-run session open, nothing moves). Exit 0 when everything passes.",
    )
    _add_connect(doctor)
    doctor.add_argument(
        "--policy.path", dest="policy_path", default=None, help="the rollout's --policy.path (loads lerobot)"
    )
    doctor.add_argument(
        "--robot.type",
        dest="robot_type",
        default=None,
        help="the rollout's --robot.type (built from defaults, never connected)",
    )
    doctor.add_argument("--task", default=None, help="the rollout's --task")
    doctor.add_argument("--fps", type=float, default=30.0, help="the rollout's --fps (default 30)")
    doctor.add_argument(
        "--inference.service_model_id",
        dest="service_model_id",
        default="",
        help="as in the rollout (default: --policy.path)",
    )
    doctor.add_argument(
        "--inference.service_revision", dest="service_revision", default="main", help="as in the rollout (default main)"
    )
    doctor.add_argument(
        "--inference.service_task", dest="service_task", default="", help="as in the rollout (default: --task)"
    )
    doctor.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for status replies (default 2)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    exporter = sub.add_parser(
        "exporter",
        help="serve the fleet's robot telemetry as Prometheus metrics (/metrics)",
        description="Subscribe to every robot's telemetry through the router and serve it on /metrics "
        "(lerobot_robot_*: staleness, state, RTT, network time, ... per robot) for Prometheus and Grafana.",
    )
    _add_connect(exporter)
    exporter.add_argument(
        "--listen",
        default="127.0.0.1:9200",
        metavar="HOST:PORT",
        help="where /metrics and /healthz listen (default 127.0.0.1:9200; 0.0.0.0:9200 for a remote Prometheus)",
    )
    exporter.add_argument(
        "--forget",
        type=float,
        default=300.0,
        metavar="S",
        help="drop a robot after this many seconds without telemetry (default 300)",
    )
    add_demo(sub)
    sim = sub.add_parser(
        "simulate",
        help="simulate a fleet at scale: N protocol-exact robots, R stub replicas, M meshed routers",
        description=(
            "N robots (the product's robot engine, many per process on one Zenoh session each), R stub replicas "
            "(batching on) and M meshed routers on loopback; per-robot state, chunks/s, staleness and totals as JSON."
        ),
    )
    sim.add_argument("--robots", type=int, default=20, help="simulated robots (default 20)")
    sim.add_argument("--replicas", type=int, default=2, help="stub policy-server replicas (default 2)")
    sim.add_argument("--routers", type=int, default=2, help="routers in a mesh (default 2)")
    sim.add_argument("--seconds", type=float, default=15.0, help="how long the robots run (default 15)")
    sim.add_argument("--per-host", type=int, default=250, help="robots per robot process (default 250)")
    sim.add_argument(
        "--drain-at",
        type=float,
        default=-1.0,
        metavar="S",
        help="drain the first replica S seconds into the run (default: no drain)",
    )
    sim.add_argument(
        "--rollout-at",
        type=float,
        default=-1.0,
        metavar="S",
        help="roll the fleet out to a new model (revision v2) S seconds into the run: start a canary, promote once it "
        "settled, and report the rollout and every robot's executed models (default: no rollout)",
    )
    sim.add_argument(
        "--new-replicas",
        type=int,
        default=None,
        metavar="K",
        help="replicas of the new model, each with seats for every robot (default 1 with --rollout-at)",
    )
    sim.add_argument("--rollout-canary", type=float, default=0.1, help="the canary's share of the robots (default 0.1)")
    sim.add_argument(
        "--rollout-step",
        type=int,
        default=0,
        help="robots per promote step (default 0: the router's default, the canary's count)",
    )
    sim.add_argument(
        "--console",
        action="store_true",
        help="also run the real console headless on the fleet and report its refresh and data age",
    )
    sim.add_argument("--max-batch", type=int, default=32, help="the replicas' batching.max_batch (default 32)")
    sim.add_argument("--infer-ms", type=float, default=10.0, help="the stub's pass time in ms (default 10)")
    sim.add_argument(
        "--telemetry-period", type=float, default=1.0, help="robots' --inference.telemetry_period_s (default 1)"
    )
    sim.add_argument(
        "--telemetry-max-period", type=float, default=1.0, help="robots' --inference.telemetry_max_period_s (default 1)"
    )
    sim.add_argument(
        "--fleet-nice",
        type=int,
        default=0,
        help="nice level of the simulated fleet's processes (routers, replicas, "
        "robot hosts), so the console is measured as on its own machine (19); default 0: same priority as the console",
    )
    sim.add_argument(
        "--router-nice",
        type=int,
        default=None,
        help="nice level of the routers alone (default: --fleet-nice); 0 keeps the "
        "network between the simulated machines out of their CPU contention",
    )
    sim.add_argument("--workdir", default=None, help="where the logs and robot reports go (default: a new temp dir)")
    sim.add_argument("--json", action="store_true", help="print the whole report (per robot too) as one JSON line")
    return parser
