"""The peers bench as its smoke tests run it: the real command from the checkout's root, bounded, its results."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lerobot_policy_remote.testing.procs import Proc

ROOT = Path(__file__).resolve().parents[1]


def run_bench(module: str, *args: str, bound_s: int) -> str:
    """`python -m module *args` from the checkout's root, killed at `bound_s` (the kit's `Proc`, so the suite starts
    it warm): its output; a failed run fails the test with its output tail."""
    proc = Proc([sys.executable, "-m", module, *args], name=module, max_seconds=bound_s, cwd=ROOT)
    try:
        status = proc.wait(bound_s + 30)
    finally:
        proc.stop()
    assert status == 0, proc.output()[-6000:]
    return proc.output()


def quick_run(out: Path, *args: str, bound_s: int) -> dict[str, Any]:
    """`bench.peers.run --quick *args --out out`: the run's results.json."""
    run_bench("bench.peers.run", "--quick", *args, "--out", str(out), bound_s=bound_s)
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    return results
