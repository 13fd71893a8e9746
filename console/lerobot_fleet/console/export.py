"""Export what a screen shows (robots, servers, alerts, events) as JSON or CSV, for reports and scripts."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lerobot_fleet.data.model import RobotRow

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def record(row: DataclassInstance | Mapping[str, Any]) -> dict[str, Any]:
    """A flat dict of one row (enums by name, tuples as lists, robot namespaces split out)."""
    d = asdict(row) if is_dataclass(row) else dict(row)
    if isinstance(row, RobotRow):
        d["state"] = row.state.name
        d["superseded_pct"] = row.superseded_pct
    if "ns" in d:
        d["model_ns"], d["revision_ns"], d["service_ns"] = (list(d.pop("ns")) + ["", "", ""])[:3]
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A spreadsheet opens a cell starting with `= + - @` (or tab/CR) as a formula: prefix such text with `'`.

    Numbers stay numbers (a negative float is not text); every string a robot or server chose is neutralised.
    """
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def write(tables: dict[str, list[dict[str, Any]]], directory: Path, stem: str, fmt: str) -> list[Path]:
    """JSON: one file holding every table. CSV: one file per table. Returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path = directory / f"{stem}.json"
        path.write_text(json.dumps(tables, indent=2, default=str))
        return [path]
    paths = []
    for name, rows in tables.items():
        path = directory / f"{stem}-{name}.csv"
        columns = sorted({k for r in rows for k in r}) if rows else ["empty"]
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns)
            w.writeheader()
            for r in rows:
                w.writerow({k: csv_cell(json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in r.items()})
        paths.append(path)
    return paths
