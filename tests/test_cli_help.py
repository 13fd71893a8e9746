import contextlib
import io
import re
import subprocess
import sys

import pytest

from lerobot_policy_remote.testing.procs import VENV_BIN

HEAVY = ("cv2", "numpy", "torch", "PIL", "lerobot")

# Runs `lerobot-fleet` in-process exactly as its console script does, then reports which heavy
# modules the run loaded. sys.modules is the truth; wall time would be a flaky proxy.
_PROBE = f"""
import sys
from lerobot_fleet.cli import main
sys.argv = ["lerobot-fleet", *sys.argv[1:]]
try:
    code = main()
except SystemExit as exc:
    code = exc.code
loaded = [m for m in {HEAVY!r} if m in sys.modules]
print("LOADED=" + ",".join(loaded))
sys.exit(0 if code in (0, None) else int(code))
"""


def _fleet_modules(*args: str) -> tuple[int, list[str], str]:
    out = subprocess.run([str(VENV_BIN / "python"), "-c", _PROBE, *args], capture_output=True, text=True, timeout=90)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("LOADED=")]
    assert line, out.stdout + out.stderr
    loaded = [m for m in line[-1].removeprefix("LOADED=").split(",") if m]
    return out.returncode, loaded, out.stdout + out.stderr


def test_console_scripts_print_help():
    for script in ("lerobot-policy-server", "lerobot-fleet"):
        out = subprocess.run([str(VENV_BIN / script), "--help"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "usage" in out.stdout.lower()


def test_fleet_help_loads_no_heavy_module():
    code, loaded, output = _fleet_modules("--help")
    assert code == 0, output
    assert loaded == [], f"`lerobot-fleet --help` loaded {loaded}"


def test_fleet_status_loads_no_heavy_module(router):
    code, loaded, output = _fleet_modules("status", "--json", "--wait", "0.3", "--router", router.endpoint)
    assert code == 0, output
    assert '"servers"' in output
    assert loaded == [], f"`lerobot-fleet status` loaded {loaded}"


# Help text for every remote flag and every fleet subcommand, with defaults, and no
# developer notes (lerobot's RTCConfig comments read "Infrastructure" / "Todo change to exp").
DEV_NOTES = ("Not in the guide", "Infrastructure", "Todo", "honest about timing")


def _flag_help(text: str, prefix: str) -> dict[str, str]:
    """Each `--flag` line of an argparse/draccus help page (options section) with the text under it."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith("  --") and stripped.startswith(prefix):
            current = stripped.split()[0].rstrip(",")
            parts = re.split(
                r"\s{2,}", stripped, maxsplit=1
            )  # argparse puts short help on the same line after 2+ spaces
            out[current] = parts[1].strip() if len(parts) == 2 else ""
        elif current and line.startswith(" " * 10) and not stripped.startswith("-"):
            out[current] = (out[current] + " " + stripped).strip()
        elif not line.startswith(" " * 10):
            current = None
    return out


def _rollout_help() -> str:
    """`lerobot-rollout --inference.type=remote --help`, lerobot's own entry point run in this process: the same parser
    and flags as the console script, without a second interpreter importing lerobot (14 s of CPU). The package was
    imported before lerobot here, so its plugin registers as the package's `__init__` would after lerobot (the slow
    tests run the console script itself, discovery included)."""
    from lerobot.scripts.lerobot_rollout import main

    from lerobot_policy_remote import plugin

    plugin.register()

    out, argv = io.StringIO(), sys.argv
    sys.argv = ["lerobot-rollout", "--inference.type=remote", "--help"]
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            main()
    finally:
        sys.argv = argv
    assert done.value.code in (0, None)
    return out.getvalue()


def test_every_remote_rollout_flag_has_help_and_no_developer_note():
    helps = _flag_help(_rollout_help(), "--inference.")
    for flag in (
        "connect_endpoint",
        "connect_endpoints",
        "zenoh_mode",
        "tls_cert",
        "tls_key",
        "tls_ca",
        "client_uuid",
        "request_timeout_s",
        "connect_timeout_s",
        "max_action_age_s",
        "fallback",
        "rtc.enabled",
        "rtc.execution_horizon",
    ):
        assert f"--inference.{flag}" in helps, f"--inference.{flag} not listed"
    for flag, text in helps.items():
        assert text and "(default:" in text, f"{flag} has no help text: {text!r}"
        assert not any(note in text for note in DEV_NOTES), f"{flag}: developer note in help: {text!r}"


def _fleet_help(*args: str) -> str:
    out = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "lerobot_fleet.cli", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_fleet_subcommand_has_a_description_and_every_flag_help():
    for verb in (
        ("router",),
        ("status",),
        ("drain",),
        ("reset",),
        ("pki", "init"),
        ("pki", "issue"),
        ("console",),
        ("doctor",),
        ("exporter",),
        ("demo",),
    ):
        text = _fleet_help(*verb)
        usage, _, body = text.partition("\n\n")
        description = body.split("\n\n")[0].strip()
        assert description and not description.startswith(("positional", "options")), (
            f"lerobot-fleet {' '.join(verb)}: no description"
        )
        helps = _flag_help(text, "--")
        helps.pop("--help", None)
        for flag, line in helps.items():
            assert line, f"lerobot-fleet {' '.join(verb)} {flag}: no help"
    status, drain, reset, issue = (
        _fleet_help("status"),
        _fleet_help("drain"),
        _fleet_help("reset"),
        _fleet_help("pki", "issue"),
    )
    assert "default 2.5" in _flag_help(status, "--")["--wait"]
    for text in (drain, reset):
        assert "default 5" in _flag_help(text, "--")["--timeout"]
        assert _flag_help(text, "--")["--json"]
    assert "role" in _flag_help(issue, "--")["--role"]
