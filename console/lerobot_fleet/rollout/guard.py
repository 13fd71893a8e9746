"""The rollout's guard: `--abort-if 'degraded_rate > 2x, rtt_p95_ms > 300'` (pure).

Each condition compares one figure of the new model with a bound: `Nx` is N times the old model's figure
(the canary is judged against the robots it left), a plain number is absolute. A condition that holds aborts
the rollout. The figures are the per-model comparison the console and `rollout status --json` show
(`data/model_compare.ModelFigures`), so the guard sees what the operator sees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

FIGURES = ("degraded_rate", "fallback_rate", "rtt_p50_ms", "rtt_p95_ms", "chunk_age_s", "errors")
_CONDITION = re.compile(r"^\s*([a-z0-9_]+)\s*>\s*([0-9]*\.?[0-9]+)\s*(x?)\s*$")


class Figures(Protocol):
    """What the guard reads of a model's figures (ModelFigures has them all)."""

    @property
    def robots(self) -> int: ...


@dataclass(frozen=True)
class Condition:
    figure: str
    bound: float
    relative: bool  # the bound is a multiple of the old model's figure

    def text(self) -> str:
        return f"{self.figure} > {self.bound:g}{'x' if self.relative else ''}"


class GuardError(ValueError):
    """An --abort-if that cannot be read; the text says how to write it."""


def parse_guard(text: str) -> list[Condition]:
    """`a > 2x, b > 0.1` (or `or` between conditions) -> conditions; '' -> none."""
    if not text.strip():
        return []
    out = []
    for part in re.split(r",|\bor\b", text):
        m = _CONDITION.match(part)
        if m is None or m.group(1) not in FIGURES:
            raise GuardError(
                f"cannot read --abort-if condition {part.strip()!r}: write FIGURE > N (absolute) or FIGURE > Nx "
                f"(N times the old model's), FIGURE one of {', '.join(FIGURES)}"
            )
        out.append(Condition(m.group(1), float(m.group(2)), m.group(3) == "x"))
    return out


def tripped(conditions: list[Condition], old: Figures | None, new: Figures | None) -> str:
    """The first condition the new model's figures meet, said in one line; '' when none (or nothing to judge yet)."""
    if new is None or new.robots <= 0:
        return ""
    for c in conditions:
        base: float | None = None
        value = getattr(new, c.figure, None)
        if value is None:
            continue
        if c.relative:
            base = getattr(old, c.figure, None) if old is not None and old.robots > 0 else None
            if base is None:
                continue
            # a relative bound over a zero baseline: any rise above the bound's own size counts, not any rise at all
            limit = c.bound * base if base > 0 else c.bound * _FLOOR.get(c.figure, 0.0)
        else:
            limit = c.bound
        if float(value) > limit:
            shown = f" (old {base:g})" if c.relative and base is not None else ""
            return f"guard {c.text()} holds: new model {c.figure} {float(value):g} > {limit:g}{shown}"
    return ""


# The smallest baseline a relative bound is taken over: with no degraded robot on the old model, `degraded_rate > 2x`
# means "more than 2 x 5 % of the new model's robots degraded", not "any at all".
_FLOOR = {
    "degraded_rate": 0.05,
    "fallback_rate": 0.01,
    "errors": 1.0,
    "rtt_p50_ms": 1.0,
    "rtt_p95_ms": 1.0,
    "chunk_age_s": 0.01,
}
