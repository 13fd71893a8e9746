import subprocess

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
