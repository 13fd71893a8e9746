"""`lerobot-fleet demo --policy`: what each policy kind builds and what every child's environment gets (no
processes)."""

from __future__ import annotations

import json
import os
import runpy
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from lerobot_fleet.sim import demo

from lerobot_policy_remote.testing import tiny_pi


def test_toy_is_todays_demo_and_a_vla_builds_offline_in_a_child(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    assert demo.policy_env("toy") == {}
    what, argv = demo.build_command("toy", tmp_path)
    assert argv[1:] == ["-m", "lerobot_policy_remote.sim.toy", str(tmp_path)] and "RTC-capable" in what
    for kind in ("smolvla", "pi0", "pi05"):
        what, argv = demo.build_command(kind, tmp_path)
        assert argv[1:] == ["-m", "lerobot_policy_remote.sim.vla_policy", kind, str(tmp_path)], kind
        assert demo.policy_env(kind)["HF_HUB_OFFLINE"] == "1"
    assert "PYTHONPATH" not in demo.policy_env("smolvla")
    for kind in ("pi0", "pi05"):  # the tiny sizes first, whatever PYTHONPATH already held
        assert demo.policy_env(kind)["PYTHONPATH"].split(os.pathsep) == [str(tiny_pi.SITE_DIR), "/somewhere/else"]
    monkeypatch.delenv("PYTHONPATH")
    assert demo.policy_env("pi0")["PYTHONPATH"] == str(tiny_pi.SITE_DIR)


def test_an_unknown_policy_is_a_usage_error(capsys):
    assert demo.run_demo(policy="act", console=False) == 2
    assert "--policy 'act' is not one of toy, smolvla, pi0, pi05" in capsys.readouterr().err


def test_the_demo_module_imports_neither_torch_nor_lerobot():
    code = (
        "import sys; from lerobot_fleet.sim import demo; demo.policy_env('pi05'); "
        "print(sorted(m for m in ('torch', 'lerobot', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_the_demos_policy_names_its_actions_so_the_server_checks_the_order_by_name(tmp_path, monkeypatch):
    """A clean demo shows no `?order` mark: the checkpoint it builds names the sim arm's joints, and the server's
    resolution finds them (in `meta/info.json`, as a training run's dataset names them). The demo's build command
    runs here as `__main__` (its module, its argv), in this process: what it writes is the same."""
    from lerobot_policy_remote.server.capabilities import resolve_action_names
    from lerobot_policy_remote.testing.fake_robot import SIM_ARM_ACTION_NAMES

    _, argv = demo.build_command("toy", tmp_path / "toy")
    assert argv[1] == "-m" and not demo.policy_env("toy")  # `python -m MODULE DIR`, no extra environment
    monkeypatch.setattr(sys, "argv", [argv[2], *argv[3:]])
    runpy.run_module(argv[2], run_name="__main__")
    names, warning, source = resolve_action_names([], object(), 6, tmp_path / "toy")
    assert names == list(SIM_ARM_ACTION_NAMES) and not warning and source.endswith("meta/info.json")


def test_each_demo_child_can_be_started_again_by_hand(tmp_path):
    """A drained demo replica is restarted with `sh <workdir>/<name>.sh`: its command and environment, as spawned."""
    fleet = demo.Fleet(workdir=tmp_path, env={"DEMO_NOTE": "it's me"})
    child = fleet.spawn(
        "server-demo-a", [sys.executable, "-c", "import os, sys; print(os.environ['DEMO_NOTE'], sys.argv[1:])", "a b"]
    )
    assert child.wait(30) == 0 and "it's me ['a b']" in child.output()
    again = subprocess.run(["sh", str(tmp_path / "server-demo-a.sh")], capture_output=True, text=True, timeout=30)
    assert again.returncode == 0 and again.stdout.strip() == "it's me ['a b']"


def test_the_demos_arms_film_at_the_size_the_policy_was_trained_on(tmp_path):
    """A VLA trained at 64x64 gets 64x64 frames from the sim arm (no resize, no size warning); a policy that takes
    no image leaves the arm's cameras alone."""
    features = {"observation.state": {"shape": [6]}, "observation.images.front": {"shape": [3, 64, 48]}}
    (tmp_path / "config.json").write_text(json.dumps({"input_features": features}))
    assert demo.camera_flags(tmp_path) == ["--robot.cameras={front: {height: 64, width: 48}}"]
    (tmp_path / "config.json").write_text(json.dumps({"input_features": {"observation.state": {"shape": [6]}}}))
    assert demo.camera_flags(tmp_path) == [] and demo.camera_flags(tmp_path / "missing") == []


def test_the_second_model_is_the_same_policy_with_other_weights(tmp_path):
    """`--second-model` serves a copy of the demo's checkpoint whose smallest non-zero tensor is negated: every file
    but the weights is the same, and the weights' fingerprint differs; a file without such a tensor is refused."""
    from lerobot_fleet.sim.second_model import CheckpointError, derive_checkpoint

    from lerobot_policy_remote.server.weights import fingerprint_files

    def safetensors(tensors: dict[str, tuple[str, bytes]]) -> bytes:
        header, blob = {}, b""
        for name, (dtype, raw) in tensors.items():
            header[name] = {"dtype": dtype, "shape": [len(raw) // 4], "data_offsets": [len(blob), len(blob) + len(raw)]}
            blob += raw
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text + blob

    first = tmp_path / "policy"
    (first / "meta").mkdir(parents=True)
    (first / "config.json").write_text('{"type": "rtc_toy"}')
    (first / "meta" / "info.json").write_text("{}")
    zeros, bias, weight = bytes(8), struct.pack("<3f", 0.5, -1.0, 2.0), struct.pack("<4f", 1, 2, 3, 4)
    (first / "model.safetensors").write_bytes(
        safetensors({"zero": ("F32", zeros), "proj.bias": ("F32", bias), "proj.weight": ("F32", weight)})
    )
    second = derive_checkpoint(first, tmp_path / "policy-v2")
    data = (second / "model.safetensors").read_bytes()
    assert data.endswith(zeros + struct.pack("<3f", -0.5, 1.0, -2.0) + weight)  # only the bias changed
    assert (second / "config.json").read_text() == (first / "config.json").read_text()
    assert (second / "meta" / "info.json").exists()
    assert fingerprint_files([second / "model.safetensors"]) != fingerprint_files([first / "model.safetensors"])
    (first / "model.safetensors").write_bytes(safetensors({"zero": ("F32", zeros), "steps": ("I64", bias)}))
    with pytest.raises(CheckpointError, match="no non-zero floating tensor"):
        derive_checkpoint(first, tmp_path / "policy-v3")
