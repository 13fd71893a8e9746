"""Draw the headline charts of docs/performance.md from the results files in bench/results/.

The results files are the record; the charts and the document's headline tables are drawn from them, so a new
result is a new JSON file and a re-run of this script, never a hand edit of a figure:

    .venv/bin/python bench/charts.py                 # writes docs/img/*.svg
    .venv/bin/python bench/charts.py --tables peers  # prints the markdown of peers.json's tables

The output is deterministic (no dates, fixed SVG ids), so an unchanged result leaves the images unchanged.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen before pyplot loads)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
IMG = ROOT / "docs" / "img"
OURS, OURS_ALT, PEER, LEGACY, AIM = "#1f6feb", "#8fb8f5", "#e07b39", "#9a9a9a", "#c0392b"

Cell = str | int | float | None


def load(name: str, results: Path = RESULTS) -> dict[str, Any]:
    """One results file, by bench name."""
    data = json.loads((results / f"{name}.json").read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{results / name}.json: a results file is one JSON object")
    return data


def table(name: str, table_id: str, results: Path = RESULTS) -> dict[str, Any]:
    """One table of a results file: {"columns": [...], "rows": [[...], ...]}."""
    tab: dict[str, Any] = load(name, results)["tables"][table_id]
    return tab


def cell_text(value: Cell) -> str:
    """How a results cell is written in the document (null is '-')."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)


def markdown(tab: dict[str, Any]) -> str:
    """A results table as the markdown table the document shows."""
    cols: list[str] = tab["columns"]
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join(["---"] + ["---:"] * (len(cols) - 1)) + " |"]
    lines += ["| " + " | ".join(cell_text(c) for c in row) + " |" for row in tab["rows"]]
    return "\n".join(lines)


class MissingProvenance(ValueError):
    """A results entry that cannot say when, at which commit and on what machine its figures were measured."""


def provenance(src: dict[str, Any], where: str = "results") -> str:
    """When and at which commit a run was measured, as its caption says it.

    The run's own `commit`, or else `recorded_in`: the commit that first put its figures into the repository. Its
    `date` is the run's, or with `date_is_upper_bound` the recording commit's ("by" that date). An entry without a
    date or without either commit raises MissingProvenance: a caption never says a figure's origin is unknown."""
    date, commit, recorded = src.get("date"), src.get("commit"), src.get("recorded_in")
    if not date or not (commit or recorded):
        raise MissingProvenance(
            f"{where}: needs a `date` and a `commit` (or `recorded_in`, the commit that first put its figures in the "
            "repository, with that commit's date and `date_is_upper_bound: true` when the run's own date is unknown)"
        )
    when = f"by {date}" if src.get("date_is_upper_bound") else str(date)
    return f"{when}, commit {commit}" if commit else f"{when} (figures recorded in commit {recorded})"


def meta_line(data: dict[str, Any], table_id: str) -> str:
    """The line under a table's marker: when, at which commit, on what and under what load it was measured.

    A table with its own entry in the results file (a run apart from the file's main one) takes that entry's."""
    entry = data.get(table_id)
    src: dict[str, Any] = entry if isinstance(entry, dict) else data
    where = f"{data.get('bench', 'results')}.{table_id}"
    if not src.get("machine"):
        raise MissingProvenance(f"{where}: needs the `machine` it was measured on")
    load_ = src.get("load")
    load_text = (
        ", ".join(cell_text(v) for v in load_)
        if isinstance(load_, list)
        else (
            ", ".join(f"{k} {cell_text(v)}" for k, v in load_.items()) if isinstance(load_, dict) else cell_text(load_)
        )
    )
    return f"*Measured {provenance(src, where)}, {src['machine']}; load {load_text}.*"


def block(name: str, table_id: str, results: Path = RESULTS) -> str:
    """The marker, the measurement line and the table, exactly as the document carries them."""
    data = load(name, results)
    return f"<!-- results: {name}.{table_id} -->\n{meta_line(data, table_id)}\n\n{markdown(data['tables'][table_id])}"


def _col(tab: dict[str, Any], index: int) -> list[Any]:
    return [row[index] for row in tab["rows"]]


def _finish(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def chart_peers_roundtrip(results: Path, out: Path) -> Path:
    """Round trip minus the server's sleep S on one machine: ours against the best peer, p50 and p99."""
    tab = table("peers", "loopback", results)
    s = [f"S = {v} ms" for v in _col(tab, 0)]
    arms = [("ours-samehost", 1, OURS), ("ours-jpeg (cross-host path)", 3, OURS_ALT), ("best peer", 5, PEER)]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    width = 0.27
    for ax, offset, label in zip(axes, (0, 1), ("p50", "p99"), strict=True):
        for i, (arm, col, color) in enumerate(arms):
            xs = [x + (i - 1) * width for x in range(len(s))]
            ax.bar(xs, _col(tab, col + offset), width, label=arm, color=color)
        ax.set_xticks(range(len(s)), s)
        ax.set_title(f"round trip - S, {label}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("ms (lower is better)")
    axes[0].legend(fontsize=8)
    legacy = ", ".join(f"{v:g}" for v in _col(tab, 10))
    fig.suptitle(f"Loopback, one robot (legacy-grpc p50: {legacy} ms, off the scale)", fontsize=10)
    path = out / "peers-roundtrip.svg"
    _finish(fig, path)
    return path


def chart_peers_rows(results: Path, out: Path) -> Path:
    """Ours / the best peer for every headline row: below 1 ours is ahead."""
    tab = table("peers", "rows", results)
    loop = table("peers", "loopback", results)
    labels = [f"same host, S = {r[0]} ms, p50" for r in loop["rows"]]
    values = [r[8] for r in loop["rows"]]
    for row in tab["rows"]:
        ratio = row[6] if row[6] is not None else row[5]
        labels.append(row[0] + ("" if row[6] is not None else " (cross-host)"))
        values.append(ratio)
    fig, ax = plt.subplots(figsize=(9, 4.6))
    ys = list(range(len(labels)))[::-1]
    ax.barh(ys, values, color=[OURS if v <= 1 else PEER for v in values])
    ax.axvline(1.0, color=AIM, linestyle="--", linewidth=1)
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_xlabel("ours / best peer (below 1: ours ahead)")
    for y, v in zip(ys, values, strict=True):
        ax.text(v + 0.01, y, f"{v:g}", va="center", fontsize=7)
    ax.set_title("Ours against the best peer, one run", fontsize=10)
    path = out / "peers-ratios.svg"
    _finish(fig, path)
    return path


def chart_batching(results: Path, out: Path) -> Path:
    """Batching speedup at N = 8 as a share of the model's own bound, per run, against the 0.9 aim."""
    data = load("batching", results)
    groups = [
        ("small ACT, CPU", _col(data["tables"]["act_cpu"], 3)),
        ("tiny SmolVLA + RTC, CPU", _col(data["tables"]["vla_rtc"], 8)),
        ("ACT, H100", _col(data["tables"]["gpu"], 3)),
    ]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    x, ticks, names = 0, [], []
    for name, values in groups:
        xs = [x + i for i in range(len(values))]
        ax.bar(xs, values, 0.8, color=OURS)
        for xi, v in zip(xs, values, strict=True):
            ax.text(xi, v + 0.02, f"{v:g}", ha="center", fontsize=7)
        ticks.append(sum(xs) / len(xs))
        names.append(name)
        x += len(values) + 1
    ax.axhline(0.9, color=AIM, linestyle="--", linewidth=1, label="aim 0.9")
    ax.set_xticks(ticks, names)
    ax.set_ylabel("speedup / model bound at N = 8")
    ax.set_ylim(0, 1.2)
    ax.legend(fontsize=8)
    ax.set_title("Cross-robot batching, each bar one run", fontsize=10)
    path = out / "batching.svg"
    _finish(fig, path)
    return path


def chart_fleet(results: Path, out: Path) -> Path:
    """The 1,000-robot run's figures that have an aim, as a share of it, per run (the columns named "run N")."""
    tab = table("fleet", "runs", results)
    runs = [i for i, c in enumerate(tab["columns"]) if str(c).startswith("run ")]
    aim = tab["columns"].index("aim")
    rows = [r for r in tab["rows"] if isinstance(r[aim], int | float) and r[aim] > 0 and r[0].endswith((" s", " ms"))]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.75 / len(runs)
    for k, col in enumerate(runs):
        xs = [x + (k - (len(runs) - 1) / 2) * width for x in range(len(rows))]
        colour = (OURS, OURS_ALT, "#4a90d9")[k % 3]
        ax.bar(xs, [r[col] / r[aim] for r in rows], width, color=colour, label=tab["columns"][col])
    ax.axhline(1.0, color=AIM, linestyle="--", linewidth=1, label="aim")
    ax.set_xticks(range(len(rows)), [f"{r[0]}\n(aim {r[aim]:g})" for r in rows], fontsize=8)
    ax.set_ylabel("share of the aim (below 1: met)")
    ax.legend(fontsize=8)
    ax.set_title("1,000 robots, 4 replicas, 3 routers, a drain, the console", fontsize=10)
    path = out / "fleet.svg"
    _finish(fig, path)
    return path


CHARTS: tuple[Callable[[Path, Path], Path], ...] = (
    chart_peers_roundtrip,
    chart_peers_rows,
    chart_batching,
    chart_fleet,
)


def draw(results: Path = RESULTS, out: Path = IMG) -> list[Path]:
    """Every chart, written under `out`; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = "lerobot-policy-remote"
    plt.rcParams["font.size"] = 9
    return [chart(results, out) for chart in CHARTS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS, help="folder of <bench>.json results files")
    ap.add_argument("--out", type=Path, default=IMG, help="where the SVG charts go")
    ap.add_argument("--tables", metavar="BENCH", help="print BENCH's tables as markdown instead of drawing")
    args = ap.parse_args(argv)
    if args.tables:
        try:
            blocks = [block(args.tables, t, args.results) for t in load(args.tables, args.results)["tables"]]
        except MissingProvenance as exc:
            print(f"bench/charts.py: {exc}", file=sys.stderr)
            return 2
        print("\n\n".join(blocks) + "\n")
        return 0
    for path in draw(args.results, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
