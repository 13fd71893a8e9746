"""Numbers and ages as the console writes them (plain text; the renderers add styles)."""

from __future__ import annotations

import math

__all__ = ["fmt_age", "fmt_ms", "fmt_num", "sparkline"]


def fmt_age(age_s: float | None) -> str:
    """Bucketed ages, so a cell does not change on every tick ("<1s", "7s", "40s", "3m", "10m+")."""
    if age_s is None or math.isnan(age_s):
        return "—"
    if age_s < 1:
        return "<1s"
    if age_s < 10:
        return f"{int(age_s)}s"
    if age_s < 60:
        return f"{int(age_s // 10) * 10}s"
    if age_s < 600:
        return f"{int(age_s // 60)}m"
    return "10m+"


def fmt_ms(ms: float | None) -> str:
    return "—" if ms is None else f"{ms:.0f}"


def fmt_num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}f}"


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: tuple[float, ...] | list[float], width: int = 40) -> str:
    """Text sparkline of the last `width` values, scaled to their own min..max."""
    vals = list(values)[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = hi - lo
    if span <= 0:
        return _BARS[0] * len(vals)
    return "".join(_BARS[min(len(_BARS) - 1, int((v - lo) / span * (len(_BARS) - 1) + 0.5))] for v in vals)
