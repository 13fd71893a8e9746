"""Non-interactive verbs for scripts: `status [--json]`, `drain SERVER`, `cordon|uncordon SERVER`, `reset ROBOT`.

They use the same store and Zenoh source as the console (no second implementation of the protocol).
Exit codes: 0 ok, 1 the target answered "no", 2 nobody answered / could not connect.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from lerobot_fleet.data.alerts import AlertBook, AlertRules
from lerobot_fleet.data.capacity import room_text
from lerobot_fleet.data.fmt import fmt_age
from lerobot_fleet.data.model import FleetSnapshot, RobotRow
from lerobot_fleet.data.sorting import sort_robots, sort_servers
from lerobot_fleet.data.sources.base import ActionResult
from lerobot_fleet.data.store import FleetStore
from lerobot_policy_remote.router_probe import probe_router
from lerobot_policy_remote.zenoh_config import FLEET_FLAGS, ZenohConfigError, ZenohSettings, open_session


def snapshot_json(snap: FleetSnapshot, alerts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    def robot(r: RobotRow) -> dict[str, Any]:
        d = asdict(r)
        d["state"] = r.state.name
        d["superseded_pct"] = r.superseded_pct
        d["ns"] = list(r.ns)
        return d

    return {
        "router": snap.router,
        "connection": snap.connection,
        "data_age_s": snap.data_age_s,
        "robots": [robot(r) for r in sort_robots(list(snap.robots), "robot")],
        "servers": [asdict(s) for s in sort_servers(list(snap.servers))],
        "notes": list(snap.notes),
        "alerts": list(alerts or []),
        "routers": [asdict(r) for r in snap.routers],
    }


def snapshot_text(snap: FleetSnapshot) -> str:
    lines = [
        f"router {snap.router}  {snap.connection}  "
        f"data age {'—' if snap.data_age_s is None else f'{snap.data_age_s:.1f}s'}"
    ]
    if snap.routers:
        from lerobot_fleet.data.sources.routers import routers_line

        lines.append(routers_line(snap.routers))
    # columns as wide as their longest value (a 32-character robot id or replica keeps the table aligned)
    rw = max([16, *(len(s.replica) for s in snap.servers), *(len(r.replica) for r in snap.robots)])
    bw = max([20, *(len(r.robot_id) for r in snap.robots)])
    lines.append(f"SERVERS ({len(snap.servers)})")
    lines.append(
        f"  {'replica':<{rw}} {'health':<9} {'sessions':>8} {'load':>5} {'req/s':>6} {'N_max':>6} "
        f"{'room':<9}  model / service"
    )
    for s in sort_servers(list(snap.servers)):
        nm = "—" if s.n_max is None else f"{s.n_max:.1f}"
        rps = "—" if s.requests_per_s is None else f"{s.requests_per_s:.1f}"
        room = room_text(s.headroom, s.room_limit)
        if s.is_refused:  # the router drops its declarations: its figures are unknown, never zeros
            lines.append(
                f"  {s.replica:<{rw}} {'refused':<9} {'—':>8} {'—':>5} {'—':>6} {'—':>6} {'—':<9}  "
                f"{s.model_id} / {s.service}  CN={s.cn}, refused {fmt_age(s.seen_age_s)} ago"
            )
            continue
        lines.append(
            f"  {s.replica:<{rw}} {s.health:<9} {f'{s.active_sessions}/{s.max_sessions}':>8} {s.load:>5.2f} "
            f"{rps:>6} {nm:>6} {room:<9}  {s.model_id} / {s.service}"
        )
    lines.append(f"ROBOTS ({len(snap.robots)})")
    lines.append(f"  {'robot':<{bw}} {'state':<13} {'server':<{rw}} {'ep':>4} {'rtt p50':>8} {'seen':>5}  last outcome")
    for r in sort_robots(list(snap.robots), "state"):
        rtt = "—" if r.rtt_p50_ms is None else f"{r.rtt_p50_ms:.0f}"
        lines.append(
            f"  {r.robot_id:<{bw}} {r.state.name:<13} {r.replica or '—':<{rw}} {r.episode_id:>4} {rtt:>8} "
            f"{fmt_age(r.seen_age_s):>5}  {r.last_outcome or '—'}"
        )
    return "\n".join(lines)


def _alerts_now(
    snap: FleetSnapshot, rules: AlertRules | None, book: AlertBook | None = None, now: float = 0.0
) -> list[dict[str, Any]]:
    book = book or AlertBook(rules)
    book.update(snap, now)
    return [a.as_dict(now) for a in book.listing()]


class FleetWatch:
    """The fleet as the console sees it, for one-shot verbs (`status`, `doctor`): the console's Zenoh source
    feeding a `FleetStore`, so every figure (room, N_max, req/s: `capacity.py`) comes from the console's code."""

    def __init__(self, settings: ZenohSettings, period_s: float = 1.0) -> None:
        from lerobot_fleet.data.sources.zenoh_source import ZenohSource

        self.store = FleetStore()
        self.source = ZenohSource(settings, status_period_s=max(0.5, period_s), scrape_period_s=max(0.5, period_s))
        self.started = time.monotonic()

    def start(self) -> FleetWatch:
        self.started = time.monotonic()
        self.source.start(self.store)
        return self

    def snapshot(
        self, min_s: float, until: Callable[[FleetSnapshot], bool] | None = None, max_s: float = 5.0
    ) -> FleetSnapshot:
        """The fleet once `min_s` have passed since `start` and `until(snapshot)` holds (or `max_s` passed); a
        pending connection attempt is let finish (up to 5 s more), so the connection state is definite."""
        time.sleep(max(0.0, self.started + min_s - time.monotonic()))
        deadline = self.started + max(min_s, max_s)
        while until is not None and not until(self.store.snapshot()) and time.monotonic() < deadline:
            time.sleep(0.1)
        deadline = time.monotonic() + 5.0
        while self.store.snapshot().connection == "connecting" and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.store.snapshot()

    def stop(self) -> bool:
        """True when every source thread ended (else leave with `_exit`: see there)."""
        return self.source.stop() is not False


def run_status(settings: ZenohSettings, as_json: bool, wait_s: float, rules: AlertRules | None = None) -> int:
    """Listen for `wait_s` (telemetry arrives about once a second), then print one snapshot.

    Exit 0 connected, 2 otherwise, whatever the router does meanwhile (never a traceback or an abort).
    """
    watch = FleetWatch(settings, period_s=wait_s / 2)
    store = watch.store
    snap = None
    try:
        snap = watch.start().snapshot(wait_s)
    except Exception as exc:  # defensive: the verbs promise an exit code, not a traceback
        print(f"lerobot-fleet status: {exc}", file=sys.stderr)
    finally:
        clean = watch.stop()
    if snap is None:
        return _exit(2, clean)
    alerts = _alerts_now(snap, rules, now=store.clock())
    if as_json:
        print(json.dumps(snapshot_json(snap, alerts), indent=2))
    else:
        print(snapshot_text(snap))
        print(f"ALERTS ({sum(1 for a in alerts if a['open'])} open)")
        tw = max([20, *(len(str(a["target"])) for a in alerts)])
        for a in alerts:
            print(f"  {a['role']:<6} {a['target']:<{tw}} {a['rule']:<12} {a['message']}  (since {a['age_s']:.0f}s)")
    if snap.connection == "connected":
        from lerobot_fleet.router.acl import hidden_fleet_note

        note = hidden_fleet_note(settings.tls_connect_certificate, len(snap.servers), len(snap.robots))
        if note:
            print(f"lerobot-fleet status: {note}", file=sys.stderr)
    if snap.connection != "connected":
        why = _why_not_connected(settings) or (snap.notes[-1] if snap.notes else "no answer")
        print(f"lerobot-fleet status: not connected to {store.router}: {why}", file=sys.stderr)
    return _exit(0 if snap.connection == "connected" else 2, clean)


def run_watch(settings: ZenohSettings, rules: AlertRules, wait_s: float, interval_s: float, count: int) -> int:
    """One JSON line per interval (snapshot + alerts with open/cleared), for scripts and other alerting."""
    from lerobot_fleet.data.sources.zenoh_source import ZenohSource

    store = FleetStore()
    book = AlertBook(rules)
    source = ZenohSource(settings, status_period_s=max(0.5, interval_s), scrape_period_s=max(0.5, interval_s))
    code = 0
    try:
        source.start(store)
        time.sleep(max(0.0, wait_s))
        n = 0
        while not count or n < count:
            snap = store.snapshot()
            line = snapshot_json(snap, _alerts_now(snap, rules, book, store.clock()))
            print(json.dumps(line, separators=(",", ":")), flush=True)
            n += 1
            if not count or n < count:
                time.sleep(max(0.05, interval_s))
        code = 0 if snap.connection == "connected" else 2
    except KeyboardInterrupt:
        code = 0
    except BrokenPipeError:  # the reader went away (`| head`)
        code = 0
    except Exception as exc:
        print(f"lerobot-fleet status --watch: {exc}", file=sys.stderr)
        code = 2
    finally:
        clean = source.stop() is not False
    return _exit(code, clean)


def run_action(settings: ZenohSettings, kind: str, target: str, reason: str, timeout: float, as_json: bool) -> int:
    from lerobot_fleet.data.ops import operator_name, send_cordon, send_drain, send_episode_reset

    try:
        session = open_session(settings)
    except ZenohConfigError as exc:
        print(f"lerobot-fleet {kind}: {_why_not_connected(settings) or exc.in_words(FLEET_FLAGS)}", file=sys.stderr)
        return 2
    try:
        by = f"{operator_name()} via lerobot-fleet {kind}"
        if kind == "drain":
            result = send_drain(session, target, None, reason, by, timeout)
        elif kind in ("cordon", "uncordon"):
            result = send_cordon(session, target, None, kind == "cordon", reason, by, timeout)
        else:
            result = send_episode_reset(session, target, None, reason, by, timeout)
        nobody = not result.ok and result.message.startswith("no ") and "answered" in result.message
        present = _token_present(session, kind, target) if nobody else None
    except Exception as exc:  # the router went away mid-query
        print(
            f"lerobot-fleet {kind}: lost the router while asking {target}: {exc}. Check the router and try again.",
            file=sys.stderr,
        )
        return 2
    finally:
        try:
            session.close()
        except Exception:
            pass
    if nobody:
        from dataclasses import replace

        from lerobot_fleet.router.acl import nobody_answered_hint

        who = "robot" if kind == "reset" else "server"
        hint = nobody_answered_hint(
            settings.tls_connect_certificate, "episode reset" if kind == "reset" else kind, who, target, present
        )
        result = replace(result, message=result.message + hint)
    print(json.dumps(_result_json(result)) if as_json else result.summary())
    if result.ok:
        return 0
    return 2 if nobody else 1


def _token_present(session: Any, kind: str, target: str, timeout: float = 1.0) -> bool | None:
    """Whether the target's liveliness token (any namespace) is on the network; None when it cannot be told.

    Absent counts only when this certificate sees other tokens at all (an operator or viewer does; the access
    control hides every token from a robot or server certificate asking this broadly, and then we cannot tell)."""
    from lerobot_fleet.data.ops import ANY
    from lerobot_fleet.router.acl import EVERYTHING

    key = ANY.robot(target, "alive") if kind == "reset" else ANY.server(target, "alive")
    try:
        if any(reply.ok is not None for reply in session.liveliness().get(key, timeout=timeout)):
            return True
        return (
            False
            if any(reply.ok is not None for reply in session.liveliness().get(EVERYTHING, timeout=timeout))
            else None
        )
    except Exception:  # a courtesy for the message only
        return None


def _why_not_connected(settings: ZenohSettings) -> str:
    """The refused port or certificate problem behind a failed connection, in our flags ('' when the probe finds
    none)."""
    problem = probe_router(settings, FLEET_FLAGS)
    return problem.in_words(FLEET_FLAGS) if problem is not None else ""


def _exit(code: int, clean: bool) -> int:
    """When a source thread is still inside zenoh (a connection attempt that outlived stop()), leave without
    interpreter finalization: zenoh objects dropped during finalization can abort the process."""
    if not clean:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _result_json(r: ActionResult) -> dict[str, Any]:
    return {
        "ok": r.ok,
        "action": r.action,
        "target": r.target,
        "message": r.message,
        "sessions": list(r.sessions),
        "episode_id": r.episode_id,
        **{k: v for k, v in r.details.items()},
    }
