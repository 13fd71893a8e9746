"""The detail screens' text: a robot's or a server's summary, history, trends, audit tail, sessions."""

from __future__ import annotations

from rich.text import Text

from lerobot_fleet.data.fmt import fmt_age, fmt_ms, sparkline
from lerobot_fleet.data.model import AuditEntry, RobotDetail, RobotState, ServerDetail, SessionEntry

from .common import SERVER_HEALTH_STYLE, STATE_STYLE
from .fleet import room_text, rtc_text


def _secs(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f} s"


def robot_summary_text(d: RobotDetail) -> Text:
    """The robot detail's head: identity, link, figures in rounded units, and why it waits (if it does)."""
    r = d.row
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("robot ", style="bold")
    t.append(r.robot_id, style="bold")
    t.append("  ")
    t.append(f" {r.state.name} ", style=STATE_STYLE[r.state])
    token = "alive" if r.alive else ("gone" if r.alive is False else "—")
    t.append(f"  token {token}  seen {fmt_age(r.seen_age_s)} ago")
    if r.is_stale:
        t.append("  (figures below are the last received, not live)", style="bold red")
    t.append("\n")
    t.append(f"model {r.model_id or '—'}  rev {r.revision or '—'}  service {r.service or '—'}\n")
    t.append(
        f"session {r.session_id or '—'}  server {r.replica or '—'}  episode {r.episode_id}  fps {r.fps:.1f}  "
        f"rtc {rtc_text(r)}\n"
    )
    delay = "—" if r.delay_steps is None else f"{r.delay_steps} steps"
    rtt = "—" if not r.rtt_p50_ms else f"{fmt_ms(r.rtt_p50_ms)}/{fmt_ms(r.rtt_p95_ms)} ms"
    t.append(
        f"requests {r.requests}  superseded {r.superseded}  errors {r.errors}  fallbacks {r.fallback_count}  "
        f"delay {delay}  queue {_secs(r.queue_s)}  staleness {_secs(r.staleness_s)}  rtt p50/p95 {rtt}\n"
    )
    if r.network_ms is not None:
        t.append(
            f"round trip split (median): server queue wait {fmt_ms(r.queue_wait_ms or 0.0)} ms  inference "
            f"{fmt_ms(r.inference_ms or 0.0)} ms  network {fmt_ms(r.network_ms)} ms\n"
        )
    if r.action_order == "unchecked":
        t.append(
            "action order NOT checked: the policy names no actions, only the dimension was compared "
            "(set action_feature_names in the server manifest)\n",
            style="bold yellow",
        )
    t.append("last outcome ")
    t.append(r.last_outcome or "—", style="" if r.last_outcome in ("", "ok") else "yellow")
    if r.waiting:
        t.append("\n")
        t.append(r.waiting, style="bold yellow")
        t.append(
            "\n  frees when a session ends on one of these, a drain is undone, or a replica is added",
            style="bright_black",
        )
    return t


def history_text(history: tuple[tuple[float, str], ...], limit: int = 8) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    for age, state in history[-limit:]:
        t.append(f"{fmt_age(age):>5} ago  ")
        t.append(state + "\n", style=STATE_STYLE[RobotState.parse(state)])
    t.rstrip()
    return t


def trend_text(name: str, values: tuple[float, ...], unit: str, digits: int = 0, width: int = 60) -> Text:
    """One labelled sparkline with last/min/max in the given unit."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{name:<10} ", style="bold")
    if not values:
        t.append("no samples yet", style="bright_black")
        return t
    t.append(sparkline(values, width).ljust(width), style="cyan")
    t.append(f"  last {values[-1]:.{digits}f}  min {min(values):.{digits}f}  max {max(values):.{digits}f} {unit}")
    return t


def audit_text(entries: tuple[AuditEntry, ...], limit: int = 12) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if not entries:
        t.append("no audit lines received", style="bright_black")
        return t
    t.append(
        f"{'age':>5} {'replica':<10} {'robot':<12} {'seq':>6} {'ep':>4} {'queue':>6} {'infer':>6} "
        f"{'sup':>3}  outcome\n",
        style="bold",
    )
    for e in entries[-limit:]:
        t.append(
            f"{fmt_age(e.age_s):>5} {e.replica[:10]:<10} {e.client_uuid[:12]:<12} {e.seq_id:>6} {e.episode_id:>4} "
            f"{e.queue_wait_ms:>6.1f} {e.inference_ms:>6.1f} {e.superseded:>3}  "
        )
        t.append(e.outcome, style="" if e.outcome == "ok" else "yellow")
        if e.error:
            t.append(f" {e.error}", style="red")
        t.append("\n")
    t.rstrip()
    return t


def server_summary_text(d: ServerDetail) -> Text:
    s = d.row
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("server ", style="bold")
    t.append(s.replica, style="bold")
    t.append("  health ")
    t.append(s.health, style=SERVER_HEALTH_STYLE.get(s.health, ""))
    if s.is_refused:  # nothing of it reaches the console: no figures to show, only the routers' word and the fix
        t.append(f"  CN={s.cn}  last refused {fmt_age(s.seen_age_s)} ago\n")
        t.append(f"model {s.model_id or '—'}  rev {s.revision or '—'}  service {s.service or '—'}\n")
        t.append("sessions —  load —  room —: the router drops its declarations, so robots cannot find it")
        for note in d.notes:
            t.append(f"\n{note}", style="red")
        return t
    token = "alive" if s.alive else ("gone" if s.alive is False else "—")
    t.append(f"  token {token}  status {fmt_age(s.status_age_s)} ago")
    if s.is_stale:
        t.append(f"  last heard {fmt_age(s.seen_age_s)} ago: figures below are old", style="bold red")
    t.append("\n")
    t.append(f"model {s.model_id or '—'}  rev {s.revision or '—'}  service {s.service or '—'}\n")
    t.append(
        f"sessions {s.active_sessions}/{s.max_sessions}  load {s.load:.2f}  "
        f"inference p50 {s.inference_ms_p50:.1f} ms  room "
    )
    t.append(room_text(s))
    if s.room_limit:
        nm = "—" if s.n_max is None else f"{s.n_max:.1f}"
        why = {
            "draining": " (draining: takes no new robots)",
            "cordon": " (cordoned: takes no new robots; its sessions keep streaming; U uncordons)",
        }.get(s.room_limit)
        t.append(
            why
            or (
                f" = min(N_max {nm}, cap {s.max_sessions or '—'}) − {s.active_sessions} active, "
                f"limited by {s.room_limit}"
            ),
            style="bright_black",
        )
    if s.engine:
        t.append(f"\nengine {s.engine}")
        t.append(
            " (a compiled graph per batch bucket)" if s.engine == "compiled" else " (lerobot's eager pass)",
            style="bright_black",
        )
    t.append(f"\nmetrics {s.metrics_url or '—'}")
    for note in d.notes:
        t.append(f"\n{note}", style="red")
    return t


def sessions_text(sessions: tuple[SessionEntry, ...]) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if not sessions:
        t.append("no sessions", style="bright_black")
        return t
    t.append(f"{'session':<24} {'robot':<14} {'ep':>4} {'requests':>9} {'sup':>5} {'err':>5}\n", style="bold")
    for x in sessions:
        t.append(
            f"{x.session_id[:24]:<24} {x.client_uuid[:14]:<14} {x.episode_id:>4} {x.requests:>9} "
            f"{x.superseded:>5} {x.errors:>5}\n"
        )
    t.rstrip()
    return t


def pairs_text(pairs: tuple[tuple[str, str], ...], width: int = 34) -> Text:
    t = Text(no_wrap=True)
    for name, value in pairs:
        t.append(f"{name:<{width}} {value}\n")
    t.rstrip()
    return t


def metrics_text(metrics: tuple[tuple[str, float], ...]) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if metrics:
        t.append("  ".join(f"{k}={v:g}" for k, v in metrics))
    else:
        t.append("not scraped yet", style="bright_black")
    return t


def robot_trends_text(d: RobotDetail, width: int = 60) -> Text:
    t = trend_text("rtt p50", d.rtt_history, "ms", 0, width)
    t.append("\n")
    t.append_text(trend_text("staleness", d.staleness_history, "s", 2, width))
    t.append("\n")
    t.append_text(trend_text("queue", d.queue_history, "s", 2, width))
    return t
