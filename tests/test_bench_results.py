"""The benchmark results files are the record: each carries when, where and under what load it was measured, the
tables docs/performance.md shows are exactly the ones drawn from them, and bench/charts.py draws its charts."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PERFORMANCE = ROOT / "docs" / "performance.md"
REQUIRED = ("date", "commit", "machine", "load")
UNKNOWN_ORIGIN = ("not recorded", "unrecorded")
COMMIT = re.compile(r"[0-9a-f]{7,40}")
sys.path.insert(0, str(ROOT / "bench"))
import charts  # noqa: E402  (bench/ is not a package on the path)

FILES = sorted(RESULTS.glob("*.json"))


def _results(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict), f"{path.name}: a results file is one JSON object"
    return data


def test_results_exist_for_every_bench_script() -> None:
    scripts = {p.stem for p in (ROOT / "bench").glob("*.py") if "__main__" in p.read_text()} - {"charts"}
    missing = sorted(s for s in scripts | {"peers"} if not (RESULTS / f"{s}.json").exists())
    assert not missing, f"no bench/results/<name>.json for {missing}: record the latest result of each"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_results_file_has_the_required_keys(path: Path) -> None:
    data = _results(path)
    missing = [k for k in REQUIRED if k not in data]
    assert not missing, f"{path.name} lacks {missing} (write null where unknown)"
    for table_id, tab in data.get("tables", {}).items():
        assert set(tab) >= {"columns", "rows"}, f"{path.name}: table {table_id} needs columns and rows"
        for row in tab["rows"]:
            assert len(row) == len(tab["columns"]), f"{path.name}: a row of {table_id} has the wrong width: {row}"
            for cell in row:
                assert cell is None or isinstance(cell, str | int | float), f"{path.name}: {cell!r} is not a cell"
                assert not isinstance(cell, float) or math.isfinite(cell), f"{path.name}: {cell!r} in {table_id}"
    for table_id in data.get("headline", []):
        assert table_id in data.get("tables", {}), f"{path.name}: headline table {table_id} is not in its tables"


def _runs(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The file's main run and each run recorded apart from it (an entry naming its own machine)."""
    return [("", data)] + [(f".{k}", v) for k, v in data.items() if isinstance(v, dict) and "machine" in v]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_run_says_when_and_at_which_commit(path: Path) -> None:
    data = _results(path)
    for key, run in _runs(data):
        where = f"{path.name}{key}"
        commit, recorded = run.get("commit"), run.get("recorded_in")
        assert run.get("date") and run.get("machine"), f"{where}: a run needs its date and machine"
        assert commit or recorded, (
            f"{where}: name the run's commit, or as `recorded_in` the commit that first put its figures in the "
            "repository (`git log -S'<a figure>' -- docs/ bench/`), dated by it with `date_is_upper_bound: true`"
        )
        for value in (commit, recorded):
            assert value is None or COMMIT.fullmatch(str(value)), f"{where}: {value!r} is not a commit hash"
        assert not run.get("date_is_upper_bound") or recorded, f"{where}: an upper-bound date comes from recorded_in"
    for table_id in data.get("tables", {}):
        line = charts.meta_line(data, table_id)
        assert not any(phrase in line for phrase in UNKNOWN_ORIGIN), f"{path.name}.{table_id}: {line}"


def test_a_run_without_provenance_fails_the_tables(tmp_path: Path) -> None:
    data = _results(RESULTS / "codec.json")
    data.pop("recorded_in", None)
    data["commit"] = None
    (tmp_path / "codec.json").write_text(json.dumps(data))
    with pytest.raises(charts.MissingProvenance):
        charts.meta_line(data, "cases")
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "charts.py"), "--results", str(tmp_path), "--tables", "codec"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode != 0 and "recorded_in" in run.stderr and not run.stdout, run


def test_performance_md_names_no_unknown_origin() -> None:
    text = PERFORMANCE.read_text()
    hits = [n for n, line in enumerate(text.splitlines(), 1) if any(p in line for p in UNKNOWN_ORIGIN)]
    assert not hits, f"docs/performance.md lines {hits}: date each table by its run or by the commit that recorded it"


def test_every_cited_table_anchor_exists() -> None:
    text = PERFORMANCE.read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    cited = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert cited <= anchors, f"docs/performance.md links to missing anchors {sorted(cited - anchors)}"


def _doc_table(text: str, marker: str) -> list[list[str]]:
    """The cells of the markdown table right after `marker` (header first, separator dropped)."""
    lines = text[text.index(marker) :].splitlines()[1:]
    rows = []
    for line in lines:
        if line.startswith("|"):
            rows.append([c.strip().strip("*").replace(",", "") for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    return [rows[0], *rows[2:]]


def _same(doc_cell: str, value: Any) -> bool:
    if value is None:
        return doc_cell == "-"
    if isinstance(value, int | float):
        try:
            return math.isclose(float(doc_cell), float(value), rel_tol=1e-9)
        except ValueError:
            return False
    return doc_cell == str(value).replace(",", "")


HEADLINES = [(p.stem, t) for p in FILES for t in _results(p).get("headline", [])]


def _disagreements(text: str, bench: str, table_id: str) -> list[str]:
    """Where the document's table for bench.table_id differs from its results file (empty when they agree)."""
    marker = f"<!-- results: {bench}.{table_id} -->"
    if marker not in text:
        return [f"docs/performance.md does not show {bench}.{table_id}: paste `bench/charts.py --tables {bench}`"]
    tab = charts.table(bench, table_id)
    doc = _doc_table(text, marker)
    if doc[0] != [c.replace(",", "") for c in tab["columns"]]:
        return [f"{bench}.{table_id}: the columns differ"]
    if len(doc) - 1 != len(tab["rows"]):
        return [f"{bench}.{table_id}: the document has another number of rows"]
    out = [
        f"{bench}.{table_id}: the document says {doc_cell!r}, the results {value!r}"
        for doc_row, row in zip(doc[1:], tab["rows"], strict=True)
        for doc_cell, value in zip(doc_row, row, strict=True)
        if not _same(doc_cell, value)
    ]
    if charts.block(bench, table_id) not in text:
        out.append(f"{bench}.{table_id}: its measurement line differs from the results")
    return out


@pytest.mark.parametrize(("bench", "table_id"), HEADLINES, ids=[f"{b}.{t}" for b, t in HEADLINES])
def test_performance_md_shows_the_results_figures(bench: str, table_id: str) -> None:
    problems = _disagreements(PERFORMANCE.read_text(), bench, table_id)
    assert not problems, "\n".join(problems)


def test_a_figure_edited_in_the_document_alone_is_caught() -> None:
    text = PERFORMANCE.read_text()
    bench, table_id = "peers", "loopback"
    row = charts.table(bench, table_id)["rows"][0]
    cells = "| " + " | ".join(charts.cell_text(c) for c in row) + " |"
    assert cells in text and not _disagreements(text, bench, table_id)
    edited = cells.replace(f"| {charts.cell_text(row[1])} |", f"| {charts.cell_text(row[1] + 0.1)} |", 1)
    assert edited != cells
    assert _disagreements(text.replace(cells, edited), bench, table_id)


def test_charts_script_writes_its_images(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "charts.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    images = sorted(tmp_path.glob("*.svg"))
    assert len(images) >= 2 and all(p.stat().st_size > 5_000 for p in images), images
    for image in images:
        committed = ROOT / "docs" / "img" / image.name
        assert committed.exists(), f"{image.name} is not committed under docs/img: run bench/charts.py"
        assert committed.read_bytes() == image.read_bytes(), f"docs/img/{image.name} is stale: run bench/charts.py"
        assert f"img/{image.name}" in PERFORMANCE.read_text(), f"docs/performance.md does not show {image.name}"
