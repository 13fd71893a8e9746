import subprocess

from support.procs import VENV_BIN


def test_console_scripts_print_help():
    for script in ("lerobot-policy-server", "lerobot-fleet"):
        out = subprocess.run([str(VENV_BIN / script), "--help"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "usage" in out.stdout.lower()


def test_console_imports_neither_torch_nor_lerobot():
    code = "import sys, lerobot_fleet.cli, lerobot_policy_remote.wire.messages; bad=[m for m in ('torch','lerobot') if m in sys.modules]; print(bad); sys.exit(bool(bad))"
    out = subprocess.run([str(VENV_BIN / "python"), "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
