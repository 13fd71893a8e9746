"""The console CLI loads no heavy module (torch, lerobot, cv2, numpy, PIL) and its verbs say what is wrong."""

from __future__ import annotations

import json
import subprocess

from lerobot_policy_remote.testing.procs import VENV_BIN

PY = str(VENV_BIN / "python")
FLEET = str(VENV_BIN / "lerobot-fleet")


def stdout_of(*argv: str) -> str:
    """What a command that must succeed prints."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=True).stdout


def test_console_import_loads_no_heavy_module():
    """What makes the console start fast is what it does not load (sys.modules, not a flaky wall-time bound)."""
    code = (
        "import sys, lerobot_fleet.console.app, lerobot_fleet.cli, lerobot_fleet.verbs.commands, "
        "lerobot_fleet.data.sources.zenoh_source; "
        "heavy = ('torch', 'lerobot', 'cv2', 'numpy', 'PIL'); "
        "bad = sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + '.' for h in heavy))); "
        "print('BAD', bad)"
    )
    out = stdout_of(PY, "-c", code)
    assert "BAD []" in out, out


def test_console_and_verbs_print_help():
    out = stdout_of(FLEET, "console", "--help")
    assert "--read-only" in out and "--router" in out
    for verb in ("status", "drain", "reset"):
        assert "--router" in stdout_of(FLEET, verb, "--help")


def test_model_store_and_sources_never_import_textual():
    """Layering (as harlequin's import-linter contract): data code is usable without the TUI."""
    code = (
        "import sys, lerobot_fleet.data.model, lerobot_fleet.data.store, lerobot_fleet.console.view, "
        "lerobot_fleet.verbs.commands, "
        "lerobot_fleet.data.sources.zenoh_source, "
        "lerobot_fleet.data.sources.fake, lerobot_fleet.data.sources.replay, lerobot_fleet.data.sources.prometheus; "
        "print('TEXTUAL', 'textual' in sys.modules)"
    )
    assert "TEXTUAL False" in stdout_of(PY, "-c", code)


def test_screens_render_the_view_and_never_read_the_store():
    """Screens render the view they are handed and post messages: no reaching into the app or the store."""
    import re
    from pathlib import Path

    import lerobot_fleet.console.screens as screens

    for path in sorted(Path(screens.__file__).parent.glob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not re.search(r"self\.fleet\b|\.store\.|self\.app\.(?!batch_update\b)", line), (
                f"{path.name}:{n}: {line.strip()}"
            )


def test_verbs_without_a_router_say_so():
    from lerobot_policy_remote.testing.procs import free_port

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    out = subprocess.run(
        [FLEET, "status", "--json", "--router", endpoint, "--wait", "1"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    data = json.loads(out.stdout)
    assert data["connection"] == "disconnected" and any(
        "could not open a zenoh client session" in n for n in data["notes"]
    )
    out = subprocess.run([FLEET, "drain", "gpu-0", "--router", endpoint], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "nothing listens at" in out.stderr and "start the router" in out.stderr
