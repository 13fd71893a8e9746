"""The console CLI starts fast and never imports torch or lerobot."""

from __future__ import annotations

import json
import re
import subprocess
import time

from support.procs import VENV_BIN

PY = str(VENV_BIN / "python")


def _import_seconds(module: str) -> float:
    """Cumulative import time of `module` (and what it pulls in), from -X importtime; best of 2."""
    best = float("inf")
    for _ in range(2):
        out = subprocess.run([PY, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, timeout=60, check=True)
        total = 0
        for line in out.stderr.splitlines():
            m = re.match(r"import time:\s+\d+\s+\|\s+(\d+)\s+\|\s?(\S+)$", line.rstrip())
            if m and not m.group(2).startswith(" "):
                total += int(m.group(1))  # top-level entries only (indentation 0)
        best = min(best, total / 1e6)
    return best


def test_console_import_is_torch_free_and_fast():
    code = (
        "import sys, lerobot_fleet.app, lerobot_fleet.cli, lerobot_fleet.verbs, lerobot_fleet.sources.zenoh_source; "
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'lerobot.')) or m == 'lerobot'); "
        "print('BAD', bad)"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "BAD []" in out.stdout, out.stdout
    seconds = _import_seconds("lerobot_fleet.app")
    assert seconds < 1.0, f"console imports took {seconds:.2f}s"


def test_console_help_is_instant():
    start = time.perf_counter()
    out = subprocess.run([str(VENV_BIN / "lerobot-fleet"), "console", "--help"], capture_output=True, text=True, timeout=60, check=True)
    elapsed = time.perf_counter() - start
    assert "--read-only" in out.stdout and "--router" in out.stdout
    assert elapsed < 3.0, elapsed  # process start included; the imports alone are far below 1 s
    for verb in ("status", "drain", "reset"):
        out = subprocess.run([str(VENV_BIN / "lerobot-fleet"), verb, "--help"], capture_output=True, text=True, timeout=60, check=True)
        assert "--router" in out.stdout


def test_model_store_and_sources_never_import_textual():
    """Layering (as harlequin's import-linter contract): data code is usable without the TUI."""
    code = (
        "import sys, lerobot_fleet.model, lerobot_fleet.store, lerobot_fleet.verbs, lerobot_fleet.sources.zenoh_source, "
        "lerobot_fleet.sources.fake, lerobot_fleet.sources.replay, lerobot_fleet.sources.prometheus; "
        "print('TEXTUAL', 'textual' in sys.modules)"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "TEXTUAL False" in out.stdout


def test_verbs_without_a_router_say_so():
    from support.procs import free_port

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    fleet = str(VENV_BIN / "lerobot-fleet")
    out = subprocess.run([fleet, "status", "--json", "--router", endpoint, "--wait", "1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    data = json.loads(out.stdout)
    assert data["connection"] == "disconnected" and any("could not open a zenoh client session" in n for n in data["notes"])
    out = subprocess.run([fleet, "drain", "gpu-0", "--router", endpoint], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Check that the router is running" in out.stderr
