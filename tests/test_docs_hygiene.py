"""Documents, code and tests say what holds, not the work log that got there: no ticket numbers or numbered work
sessions, no citations of a design document that is not in the repository, and a performance page a reader can
finish (its run history lives in git and in bench/results/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOPE = ("docs", "README.md", "src", "console", "bench", "tests")
WORK_LOG = re.compile(r"session [0-9]+|sessions [0-9]+-[0-9]+|issue[- ]?[0-9]+", re.IGNORECASE)
# The forbidden words are assembled, so this file does not match what it forbids.
ABSENT_SPEC = re.compile(r"\bspec (?:§?[0-9]+\.[0-9]+|P[0-9]+)\b|v2" + "-design|zenoh" + "-facts", re.IGNORECASE)
# One latest result per bench (CPU and GPU rows), no history.
MAX_PERFORMANCE_LINES = 500


def _text_files() -> list[Path]:
    """Every text file in scope, as `grep -r` would read it (bytecode caches and binary files left out)."""
    out = []
    for entry in SCOPE:
        path = ROOT / entry
        for f in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            if "__pycache__" in f.parts or f.suffix in {".pyc", ".png", ".jpg"}:
                continue
            data = f.read_bytes()
            if b"\0" not in data:
                out.append(f)
    return out


def _hits(pattern: re.Pattern[str]) -> list[str]:
    hits = []
    for f in _text_files():
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    return hits


def test_no_ticket_numbers_or_work_sessions() -> None:
    hits = _hits(WORK_LOG)
    assert not hits, "state the rule, not the ticket or session (evidence goes to docs/decisions.md):\n" + "\n".join(
        hits
    )


def test_no_citations_of_a_design_document_outside_the_repository() -> None:
    hits = _hits(ABSENT_SPEC)
    assert not hits, "say the rule itself; the cited document is not in the repository:\n" + "\n".join(hits)


def test_the_patterns_find_what_they_forbid() -> None:
    session, issue, spec = "Sess" + "ion", "iss" + "ue", "sp" + "ec"
    assert WORK_LOG.search(f"measured in {session} 14") and WORK_LOG.search(f"({issue}-22)")
    assert WORK_LOG.search(f"{session.lower()}s 9-11") and not WORK_LOG.search("a session of its own")
    assert ABSENT_SPEC.search(f"the check matrix ({spec} 8.4)") and not ABSENT_SPEC.search("a spec of the model")


def test_performance_page_stays_short() -> None:
    lines = len((ROOT / "docs" / "performance.md").read_text().splitlines())
    assert lines <= MAX_PERFORMANCE_LINES, (
        f"docs/performance.md has {lines} lines (at most {MAX_PERFORMANCE_LINES}): keep the latest result per bench, "
        "move history to git"
    )
