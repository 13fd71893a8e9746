"""The confirmation dialogs' text: what a drain, cordon or reset will do, and the results of one."""

from __future__ import annotations

from rich.text import Text

from lerobot_fleet.data import capacity
from lerobot_fleet.data.model import FleetSnapshot, ServerRow

from .fleet import room_text


def drain_body(snap: FleetSnapshot, replica: str) -> Text:
    s = snap.server(replica)
    t = Text()
    if s is None:
        t.append(f"Server {replica} is not in the current view.")
        return t
    t.append("Server ")
    t.append(s.replica, style="bold")
    t.append(f" serving {s.model_id} @ {s.revision}, service ")
    t.append(s.service, style="bold")
    t.append(".\n\nIt stops accepting new sessions, finishes requests in flight, and tells its robots to move.\n")
    if s.session_robots:
        t.append(f"{len(s.session_robots)} session(s) will move: ", style="bold")
        t.append(", ".join(s.session_robots))
        t.append("\n")
    else:
        t.append("It has no sessions: nothing moves.\n")
    t.append_text(_peers_room(snap, [s]))
    return t


def _peers_room(snap: FleetSnapshot, leaving: list[ServerRow], moving: bool = True) -> Text:
    """The other replicas of each namespace with room; with `moving` (a drain), how many of the robots that move will
    find none, by name. Room is the console's (`capacity.room`): min(N_max, cap) − active on healthy replicas."""
    t = Text()
    names = {s.replica for s in leaving}
    for ns in sorted({s.ns for s in leaving}):
        peers = [p for p in snap.servers if p.replica not in names and p.ns == ns]
        room = sorted(
            (p for p in peers if p.health in ("ok", "cold") and (p.headroom or 0) > 0), key=lambda p: p.replica
        )
        if room:
            t.append("Replicas with room: " + ", ".join(f"{p.replica} ({room_text(p)})" for p in room) + "\n")
        else:
            t.append(
                f"No other replica of {ns.service or 'this service'} has room: "
                + ("its robots will wait and back off.\n" if moving else "new robots will wait.\n"),
                style="bold red",
            )
        if not moving:
            continue
        movers = sorted(r for s in leaving if s.ns == ns for r in s.session_robots)
        waiting = sorted(r.robot_id for r in snap.robots if r.ns == ns and r.waiting)
        free = sum(p.headroom or 0 for p in room)
        short = min(len(movers), len(movers) + len(waiting) - free)
        if movers and short > 0:
            who = (
                ", ".join(movers)
                if short >= len(movers)
                else f"{short} of {', '.join(movers)} (room for {free}: whoever asks first)"
            )
            t.append(f"{short} robot(s) will find no room and wait: {who}", style="bold red")
            if waiting:
                t.append(f"; {len(waiting)} already wait(s) for a seat: {', '.join(waiting)}", style="bold red")
            t.append("\n")
    t.rstrip()
    return t


def cordon_body(snap: FleetSnapshot, targets: tuple[str, ...], on: bool) -> Text:
    """Cordon: every target with the sessions that keep streaming, and where new robots go. Uncordon: the room back."""
    t = Text()
    rows = [snap.server(x) for x in targets]
    if on:
        t.append(
            "These servers stop admitting new sessions; the sessions they have keep streaming:\n"
            if len(targets) > 1
            else "It stops admitting new sessions; the sessions it has keep streaming.\n"
        )
    else:
        t.append("These servers admit new sessions again:\n" if len(targets) > 1 else "It admits new sessions again.\n")
    for x, s in zip(targets, rows, strict=True):
        t.append(f"  • {x}", style="bold")
        if s is None:
            t.append("  (not in the current view)\n")
            continue
        t.append(f"  {s.model_id} @ {s.revision}, service {s.service}: {s.active_sessions} session(s)")
        if on and s.session_robots:
            t.append(f" keep streaming ({', '.join(s.session_robots)})")
        if not on:
            t.append(
                "; room once uncordoned "
                f"{capacity.room_text(*capacity.room(s.n_max, s.max_sessions, s.active_sessions, s.draining))}"
            )
        t.append("\n")
    if on:
        t.append("New robots of the service go to:\n")
        t.append_text(_peers_room(snap, [s for s in rows if s is not None], moving=False))
    t.rstrip()
    return t


def reset_body(snap: FleetSnapshot, key: str) -> Text:
    r = snap.robot(key)
    t = Text()
    if r is None:
        t.append(f"Robot {key} is not in the current view.")
        return t
    t.append("Robot ")
    t.append(r.robot_id, style="bold")
    t.append(f" is {r.state.name} in episode {r.episode_id}")
    if r.replica:
        t.append(f", session {r.session_id} on server {r.replica}")
    t.append(".\n\n")
    t.append(
        f"It ends episode {r.episode_id} at its next safe point and starts episode {r.episode_id + 1}: "
        "its action queue is cleared and the server resets the session's episode state. "
        "Other robots are not affected."
    )
    return t


ACTION_LABELS = {"drain": "Drain", "cordon": "Cordon", "uncordon": "Uncordon", "reset": "Reset episode"}


def confirm_title(kind: str, targets: tuple[str, ...], snap: FleetSnapshot) -> str:
    if kind in ("cordon", "uncordon"):
        return (
            f"{ACTION_LABELS[kind]} server {targets[0]}?"
            if len(targets) == 1
            else f"{ACTION_LABELS[kind]} {len(targets)} servers?"
        )
    if len(targets) == 1:
        if kind == "drain":
            return f"Drain server {targets[0]}?"
        r = snap.robot(targets[0])
        return f"Reset the episode of robot {r.robot_id if r else targets[0]}?"
    return f"Drain {len(targets)} servers?" if kind == "drain" else f"Reset the episodes of {len(targets)} robots?"


def confirm_body(kind: str, targets: tuple[str, ...], snap: FleetSnapshot) -> Text:
    """One target: the full impact. Several: every target on its own line, then the shared impact."""
    if kind in ("cordon", "uncordon"):
        return cordon_body(snap, targets, kind == "cordon")
    if len(targets) == 1:
        return drain_body(snap, targets[0]) if kind == "drain" else reset_body(snap, targets[0])
    t = Text()
    if kind == "drain":
        rows = [snap.server(x) for x in targets]
        t.append("These servers stop accepting new sessions and tell their robots to move:\n")
        for x, s in zip(targets, rows, strict=True):
            t.append(f"  • {x}", style="bold")
            t.append(f"  {s.active_sessions} session(s), {s.service}\n" if s else "  (not in the current view)\n")
        t.append_text(_peers_room(snap, [s for s in rows if s is not None]))
    else:
        t.append("Each robot ends its episode at its next safe point and starts the next one:\n")
        for x in targets:
            r = snap.robot(x)
            t.append(f"  • {r.robot_id if r else x}", style="bold")
            t.append(
                f"  {r.state.name}, episode {r.episode_id} → {r.episode_id + 1}, server {r.replica or '—'}\n"
                if r
                else "  (not in the current view)\n"
            )
        t.append("Other robots are not affected.")
    t.rstrip()
    return t


def results_text(kind: str, results: list[tuple[str, bool, str]]) -> tuple[str, bool]:
    """Per-target results of a (bulk) action as one result block, and whether all succeeded."""
    if len(results) == 1:
        return results[0][2], results[0][1]
    ok = sum(1 for _, good, _ in results if good)
    lines = [f"{kind}: {ok} of {len(results)} ok"] + [f"  {line}" for _, _, line in results]
    return "\n".join(lines), ok == len(results)
