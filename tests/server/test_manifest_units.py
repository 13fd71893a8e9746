"""Manifest validation, CLI parsing, the session check matrix and action-name resolution (pure units)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lerobot_policy_remote.server.capabilities import Capabilities, StartupRefusal, check_open, resolve_action_names
from lerobot_policy_remote.server.manifest import Manifest, ManifestError, ModelSpec
from lerobot_policy_remote.server.manifest_args import parse_manifest
from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES
from lerobot_policy_remote.wire.messages import FeatureSpec, RtcSettings, SessionOpen

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def test_example_manifest_parses_and_cli_overrides():
    m = parse_manifest(
        ["--manifest", str(MANIFESTS / "act-local.yaml"), "--max_sessions=7", "--model.repo_or_path=/x/y"]
    )
    assert m.max_sessions == 7 and m.model.repo_or_path == "/x/y" and m.default_task == "pick up the cube"
    assert m.action_feature_names == SIM_ARM_ACTION_NAMES
    m.validate()
    assert m.keys().base == "@lerobot/%2Fx%2Fy/main/pick%20up%20the%20cube"
    assert parse_manifest(["--manifest", str(MANIFESTS / "pi0-gpu.yaml")]).model.dtype == "bfloat16"


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(model=ModelSpec(repo_or_path="")), "model.repo_or_path is empty"),
        (dict(default_task=""), "default_task"),
        (dict(serving_mode="batch"), "serving_mode"),
        (dict(max_sessions=0), "max_sessions"),
        (dict(model=ModelSpec(repo_or_path="a", dtype="int8")), "model.dtype"),
        (dict(replica_id="bad id!"), "not a valid id"),
        (dict(action_feature_names=["a", "a"]), "duplicates"),
        (dict(model=ModelSpec(repo_or_path="a", compile="fast")), "model.compile 'fast' is not one of auto, off, on"),
        (dict(model=ModelSpec(repo_or_path="a", compile_buckets=[0, 4])), "model.compile_buckets"),
    ],
)
def test_manifest_errors_say_what_to_fix(kw, words):
    base = dict(model=ModelSpec(repo_or_path="a"), default_task="t")
    with pytest.raises(ManifestError, match=words):
        Manifest(**{**base, **kw}).validate()


@pytest.mark.parametrize("written, meant", [("on", "on"), ("off", "off"), ("auto", "auto"), ("ON", "on")])
def test_model_compile_on_and_off_mean_what_they_say_on_the_command_line_and_in_yaml(tmp_path, written, meant):
    """YAML (and draccus on the command line) reads a bare on / off as a boolean: the manifest still means the word."""
    cli = parse_manifest(["--model.repo_or_path=/x", "--default_task=t", f"--model.compile={written}"])
    yaml_file = tmp_path / "m.yaml"
    yaml_file.write_text(f"model:\n  repo_or_path: /x\n  compile: {written}\ndefault_task: t\n")
    for manifest in (cli, parse_manifest(["--manifest", str(yaml_file)])):
        manifest.validate()
        assert manifest.model.compile == meant


def caps(**kw) -> Capabilities:
    base = dict(
        policy_type="act",
        action_dim=6,
        action_names=list(SIM_ARM_ACTION_NAMES),
        image_keys=["observation.images.front"],
        image_shapes={"observation.images.front": (3, 96, 128)},
        state_dim=6,
        state_key="observation.state",
        chunk_size=20,
        trained_fps=30.0,
        strict_fps=False,
        fps_tolerance=0.05,
        default_task="pick",
        pin_task=False,
        supports_rtc=True,
        serving_mode="shared",
        max_sessions=2,
        fingerprint="f" * 64,
    )
    return Capabilities(**{**base, **kw})


def req(**kw) -> SessionOpen:
    feats = [
        FeatureSpec("observation.state", "state", [6]),
        FeatureSpec("observation.images.front", "image", [96, 128, 3]),
    ]
    base = dict(client_uuid="r1", action_names=list(SIM_ARM_ACTION_NAMES), features=feats, fps=30.0, task="pick")
    return SessionOpen(**{**base, **kw})


def test_check_matrix_units():
    assert check_open(req(), caps(), 0, False, False).ok
    assert check_open(req(task="other"), caps(pin_task=True), 0, False, False).code == "task_mismatch"
    assert check_open(req(task="other"), caps(), 0, False, False).ok  # not pinned: per-session task
    assert check_open(req(fps=15.0), caps(strict_fps=True), 0, False, False).code == "fps_mismatch"
    v = check_open(req(rtc=RtcSettings(enabled=True)), caps(), 0, False, False)
    assert v.ok and v.rtc_active
    # a policy without RTC: downgraded without a warning (expected for ACT; the ack's rtc_active says it)
    v = check_open(req(rtc=RtcSettings(enabled=True)), caps(supports_rtc=False), 0, False, False)
    assert v.ok and not v.rtc_active and v.warnings == []
    full = check_open(req(), caps(), 2, False, False)
    assert full.code == "server_full" and full.message == "server full: 2/2 sessions active"
    assert check_open(req(), caps(), 2, False, True).ok  # re-open by the same client
    assert check_open(req(), caps(), 0, True, False).code == "draining"
    # Without names: dimension still hard-checked, order unverifiable -> a warning that says how to fix it.
    nameless = caps(action_names=[], names_warning="set action_feature_names in the server manifest")
    v = check_open(req(), nameless, 0, False, False)
    assert v.ok and any("action_feature_names" in w for w in v.warnings)
    assert check_open(req(action_names=SIM_ARM_ACTION_NAMES[:5]), nameless, 0, False, False).code == "action_mismatch"


def test_resolve_action_names():
    class Cfg:
        action_feature_names = None

    assert resolve_action_names(list(SIM_ARM_ACTION_NAMES), Cfg(), 6) == (
        list(SIM_ARM_ACTION_NAMES),
        "",
        "manifest action_feature_names",
    )
    names, warning, source = resolve_action_names([], Cfg(), 6)
    assert names == [] and "action_feature_names" in warning and source == ""
    Cfg.action_feature_names = ["a", "b"]
    assert resolve_action_names([], Cfg(), 2)[0] == ["a", "b"]
    with pytest.raises(StartupRefusal, match="dimension 6"):
        resolve_action_names(["a", "b"], Cfg(), 6)
