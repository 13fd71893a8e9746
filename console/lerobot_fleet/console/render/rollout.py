"""The per-model screen's text: the rollout (phase, models, robots per state, events) and each model's figures, and
the rollout confirmations. Pure: the view's figures in, `Text` and cells out."""

from __future__ import annotations

from rich.text import Text

from lerobot_fleet.data.fmt import fmt_age, sparkline
from lerobot_fleet.data.model_compare import FIGURE_HEADS, ModelFigures, figure_texts
from lerobot_fleet.data.rollout_read import RolloutRead, model_text, summary_lines
from lerobot_policy_remote.wire.rollout import ModelRef, Phase, RolloutStatus

from .common import OLD, Cell, _t

TREND_WIDTH = 20
MODEL_COLUMNS: list[tuple[str, str, int]] = [
    ("role", "", 3),
    ("model", "model@revision fingerprint", 40),
    *((head, head, width) for head, width in zip(FIGURE_HEADS, (6, 6, 11, 5, 10, 7, 6), strict=True)),
    ("trend", "rtt p50 trend", TREND_WIDTH),
]
PHASE_STYLE = {
    Phase.CANARY.value: "bold yellow",
    Phase.PROMOTING.value: "bold cyan",
    Phase.COMPLETE.value: "bold green",
    Phase.ABORTING.value: "bold magenta",
    Phase.ABORTED.value: "bold red",
}
ROLLOUT_LABELS = {"rollout-start": "Start rollout", "rollout-promote": "Promote", "rollout-abort": "Abort rollout"}
EVENTS_SHOWN = 5


def _same(m: ModelFigures, ref: ModelRef) -> bool:
    if m.fingerprint and ref.fingerprint:
        return m.fingerprint.startswith(ref.fingerprint) or ref.fingerprint.startswith(m.fingerprint)
    return bool(ref.model_id) and (m.model_id, m.revision) == (ref.model_id, ref.revision)


def model_role(m: ModelFigures, status: RolloutStatus | None) -> str:
    """`old` or `new` for the rollout's from and to models (of its service); '' for any other."""
    if status is None or not status.rollout_id or (status.service and status.service != m.service):
        return ""
    if _same(m, status.to_model):
        return "new"
    return "old" if _same(m, status.from_model) else ""


def model_cells(m: ModelFigures, role: str, trend: tuple[float, ...]) -> tuple[Cell, ...]:
    """One model's row: its role in the rollout, its name, its figures and its round trip's sparkline."""
    texts = figure_texts(m)
    degraded = "yellow" if m.degraded_rate > 0 else ""
    styles = ("", "", "", degraded, "yellow" if m.fallback_rate > 0 else "", "", "red" if m.errors else "")
    return (
        (role, "bold cyan" if role == "new" else "bold"),
        _t(m.label),
        *((text, style) for text, style in zip(texts, styles, strict=True)),
        (sparkline(trend, TREND_WIDTH), "cyan"),
    )


def rollout_text(read: RolloutRead) -> Text:
    """The rollout block: phase and models, robots per state, its message and its latest events; old figures dim,
    with how old they are and why (a failed read, no router)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    status = read.status
    if read.is_old:
        why = read.error or "no read yet"
        age = "never read" if read.age_s is None else f"last read {fmt_age(read.age_s)} ago"
        t.append(f"OLD ({age}): {why}\n", style="bold yellow")
    if status is None:
        t.append("no rollout status from the fleet router yet", style="bright_black")
        return t
    dim = OLD if read.is_old else ""
    lines = summary_lines(status)
    if not status.rollout_id:  # one line: nothing has started on this router
        t.append(lines[0], style="bright_black")
        return t
    head, counts, message = lines
    phase = status.phase or "?"
    t.append(f"rollout {status.rollout_id}: ", style=dim or "bold")
    t.append(phase.upper(), style=dim or PHASE_STYLE.get(phase, "bold"))
    t.append(head[len(f"rollout {status.rollout_id}: {phase}") :] + "\n", style=dim)
    t.append(counts + "\n", style=dim)
    t.append(message, style=dim or "bold")
    for line in status.events[-EVENTS_SHOWN:]:
        t.append("\n  " + line, style=dim or "bright_black")
    return t


def rollout_confirm(kind: str, target: ModelFigures | None, read: RolloutRead) -> tuple[str, Text]:
    """Title and body of a rollout's confirmation: what moves, from what to what."""
    status = read.status
    t = Text()
    if read.is_old:
        t.append("The rollout status shown is old: the router decides from its own, current state.\n\n", style="yellow")
    if kind == "rollout-start":
        name = target.label if target else "?"
        t.append("Start a rollout to ")
        t.append(name, style="bold")
        t.append(f" in service {target.service if target else '?'}: the router moves a 10% canary of its robots now")
        t.append("; promote moves the rest, abort moves them back.")
        return f"Roll out {name}?", t
    if status is None or not status.rollout_id:
        t.append("No rollout is known: the router will say so.")
        return f"{ROLLOUT_LABELS[kind]}?", t
    moves = f"{model_text(status.from_model)} -> {model_text(status.to_model)}"
    t.append(f"Rollout {status.rollout_id} ({status.phase}): {moves}.\n")
    if kind == "rollout-promote":
        t.append("The router moves the robots still on the old model to the new one, step by step.")
    else:
        t.append("The router moves every robot it moved back to the old model.", style="bold red")
    return f"{ROLLOUT_LABELS[kind]} {status.rollout_id}?", t
