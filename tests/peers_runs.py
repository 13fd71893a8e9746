"""The peers bench as its smoke tests run it: the real command from the checkout's root, bounded, its results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_bench(module: str, *args: str, bound_s: int) -> str:
    """`python -m module *args`, killed at `bound_s`: its stdout; a failed run fails the test with its output tail."""
    proc = subprocess.run(
        ["timeout", "-s", "KILL", str(bound_s), sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=bound_s + 30,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def quick_run(out: Path, *args: str, bound_s: int) -> dict[str, Any]:
    """`bench.peers.run --quick *args --out out`: the run's results.json."""
    run_bench("bench.peers.run", "--quick", *args, "--out", str(out), bound_s=bound_s)
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    return results
