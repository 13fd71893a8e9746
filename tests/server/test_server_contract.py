"""The policy contract, server side: action order, exclusive refusal wording, --help, audit log, start line,
peer-mode settings, and the debug capture replayed byte for byte (pure units + in-process servers)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import make_manifest

from lerobot_policy_remote.server.audit import Auditor, audit_log, configure_audit_log
from lerobot_policy_remote.server.capabilities import (
    ACTION_ORDER_UNCHECKED,
    Capabilities,
    check_open,
    resolve_action_names,
)
from lerobot_policy_remote.server.cli import usage
from lerobot_policy_remote.server.manifest import (
    DEFAULT_ROUTER,
    FIELD_HELP,
    Manifest,
    ManifestError,
    ModelSpec,
    manifest_fields,
)
from lerobot_policy_remote.testing.fake_robot import FakeRobot
from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES
from lerobot_policy_remote.wire.messages import AuditLine, FeatureSpec, SessionOpen
from lerobot_policy_remote.zenoh_config import ZenohSettings


def caps(**kw) -> Capabilities:
    base = dict(
        policy_type="act",
        action_dim=6,
        action_names=[],
        image_keys=[],
        image_shapes={},
        state_dim=6,
        state_key="observation.state",
        chunk_size=20,
        trained_fps=30.0,
        strict_fps=False,
        fps_tolerance=0.05,
        default_task="pick",
        pin_task=False,
        supports_rtc=False,
        serving_mode="shared",
        max_sessions=2,
        fingerprint="f" * 64,
        names_warning="action names/order could not be verified",
    )
    return Capabilities(**{**base, **kw})


def req(**kw) -> SessionOpen:
    return SessionOpen(
        **{
            **dict(
                client_uuid="r1",
                action_names=list(SIM_ARM_ACTION_NAMES),
                features=[FeatureSpec("observation.state", "state", [6])],
                fps=30.0,
            ),
            **kw,
        }
    )


# ------------------------------------------------------------------ action order


def test_verdict_says_whether_names_were_checked_and_strict_refuses_unchecked():
    unchecked = check_open(req(), caps(), 0, False, False)
    assert (
        unchecked.ok and not unchecked.names_checked and any("could not be verified" in w for w in unchecked.warnings)
    )
    checked = check_open(req(), caps(action_names=list(SIM_ARM_ACTION_NAMES)), 0, False, False)
    assert checked.ok and checked.names_checked
    strict = check_open(req(), caps(strict_action_names=True), 0, False, False)
    assert not strict.ok and strict.code == ACTION_ORDER_UNCHECKED
    assert "strict_action_names" in strict.message and "action_feature_names" in strict.message
    # strict with names known: the ordinary name+order check decides
    assert check_open(
        req(), caps(strict_action_names=True, action_names=list(SIM_ARM_ACTION_NAMES)), 0, False, False
    ).ok


def test_action_names_from_a_dataset_info_json_beside_the_checkpoint(tmp_path):
    class Cfg:
        action_feature_names = None

    ckpt = tmp_path / "run" / "pretrained_model"
    ckpt.mkdir(parents=True)
    assert resolve_action_names([], Cfg(), 6, ckpt)[0] == []
    meta = tmp_path / "run" / "meta"
    meta.mkdir()
    (meta / "info.json").write_text(
        json.dumps({"features": {"action": {"dtype": "float32", "shape": [6], "names": list(SIM_ARM_ACTION_NAMES)}}})
    )
    names, warning, source = resolve_action_names([], Cfg(), 6, ckpt)
    assert names == list(SIM_ARM_ACTION_NAMES) and warning == "" and source.endswith("meta/info.json")
    # the manifest still wins, and a file naming a different dimension is a startup error naming the file
    assert resolve_action_names(list("abcdef"), Cfg(), 6, ckpt)[0] == list("abcdef")
    (meta / "info.json").write_text(json.dumps({"features": {"action": {"names": {"motors": ["a", "b"]}}}}))
    with pytest.raises(Exception, match="info.json has 2 names"):
        resolve_action_names([], Cfg(), 6, ckpt)


def test_exclusive_refusal_says_one_robot_at_a_time_and_why():
    c = caps(
        serving_mode="exclusive",
        max_sessions=1,
        policy_type="diffusion",
        serving_reason="diffusion: predict_action_chunk reads observation queues fed by select_action (stateful)",
    )
    v = check_open(req(), c, 1, False, False)
    assert v.code == "server_full"
    assert "one robot at a time" in v.message and "observation queues" in v.message
    assert "one lerobot-policy-server per robot" in v.message
    # a shared server's refusal keeps the short form the robot and the console already parse
    assert check_open(req(), caps(), 2, False, False).message == "server full: 2/2 sessions active"


# ------------------------------------------------------------------ first contact


def test_help_lists_every_manifest_field_with_type_default_and_a_line():
    text = usage()
    fields = manifest_fields()
    assert len(fields) > 40
    for name, tp, default in fields:
        assert name in FIELD_HELP, f"manifest field {name} has no --help line in FIELD_HELP"
        shown = "(required)" if name == "model.repo_or_path" else f"default: {default!r}"
        assert f"--{name}  {tp}  [{shown}]" in text, name
        assert FIELD_HELP[name] in text
    assert "--audit_log=off|stderr|PATH" in text and "[default: stderr]" in text
    assert "replay CAPTURE_DIR" in text


def test_peer_mode_keeps_only_the_endpoints_given_client_mode_defaults_to_the_local_router():
    m = Manifest(model=ModelSpec(repo_or_path="a"), default_task="t")
    assert m.zenoh_settings().connect_endpoints == [DEFAULT_ROUTER]
    peer = Manifest(
        model=ModelSpec(repo_or_path="a"),
        default_task="t",
        zenoh=ZenohSettings(mode="peer", listen_endpoints=["tcp/0.0.0.0:7447"]),
    )
    peer.validate()
    assert peer.zenoh_settings().connect_endpoints == [] and peer.zenoh_settings().listen_endpoints == [
        "tcp/0.0.0.0:7447"
    ]
    with pytest.raises(ManifestError, match="listen_endpoints"):
        Manifest(model=ModelSpec(repo_or_path="a"), default_task="t", zenoh=ZenohSettings(mode="peer")).validate()


def test_audit_log_off_stderr_and_file(tmp_path, caplog):
    line = AuditLine(
        ts="t", session_id="s", client_uuid="robot-217", seq_id=3, episode_id=1, queue_wait_ms=1.0, inference_ms=2.0
    )
    try:
        assert configure_audit_log("off") == "audit=zenoh-only"
        assert not audit_log.isEnabledFor(logging.INFO)
        assert configure_audit_log("stderr") == "audit=stderr"
        with caplog.at_level(logging.INFO, logger="lerobot.policy_server.audit"):
            Auditor(None).emit(line)
        assert any('"client_uuid":"robot-217"' in r.getMessage() for r in caplog.records)
        path = tmp_path / "logs" / "audit.jsonl"
        assert configure_audit_log(str(path)) == f"audit={path}"
        Auditor(None).emit(line)
        Auditor(None).emit(line)
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        assert len(rows) == 2 and rows[0]["client_uuid"] == "robot-217" and rows[0]["seq_id"] == 3
        with pytest.raises(ValueError, match="directory"):
            configure_audit_log(str(tmp_path))
    finally:
        configure_audit_log("off")


def test_start_line_says_where_healthz_and_metrics_listen(router, act_ckpt):
    from lerobot_policy_remote.server.service import PolicyServer

    lines: list[str] = []
    s = PolicyServer(make_manifest(router, act_ckpt), progress=lines.append, audit_where="audit=stderr").start()
    try:
        up = next(x for x in lines if x.startswith("Policy server up:"))
        port = s.health_port
        assert f"healthz=http://127.0.0.1:{port}/healthz" in up and f"metrics=http://127.0.0.1:{port}/metrics" in up
        assert "this machine only" in up and "health_host=0.0.0.0" in up
        assert f"zenoh=client connect={router.endpoint}" in up and "audit=stderr" in up
        assert any(x.startswith("Action order: UNCHECKED") for x in lines)
    finally:
        s.stop()


# ------------------------------------------------------------------ debug capture + replay


def test_debug_capture_holds_wire_bytes_and_settings_and_replays_byte_identical(
    router, act_rel_ckpt, zenoh_client, tmp_path, capsys
):
    from lerobot_policy_remote.server.replay import load_captures
    from lerobot_policy_remote.server.replay import main as replay_main
    from lerobot_policy_remote.server.service import PolicyServer

    cap = tmp_path / "capture"
    m = make_manifest(router, act_rel_ckpt, action_feature_names=list(SIM_ARM_ACTION_NAMES))
    m.debug.capture_dir = str(cap)
    s = PolicyServer(m, progress=lambda t: None).start()
    try:
        robot = FakeRobot(zenoh_client(), s.keys, "robot-217")
        assert robot.open(rtc=False).ok
        rng = np.random.default_rng(0)
        for i in range(3):
            img = rng.integers(0, 255, (96, 128, 3), dtype=np.uint8)
            robot.request(np.linspace(-10, 10, 6) + i, image=img, episode_start=i == 0, delay=i)
    finally:
        s.stop()  # the capture thread writes what is queued before it ends
    caps_ = load_captures(cap)
    assert len(caps_) == 3 and (cap / "manifest.yaml").is_file()
    first = caps_[0]
    assert {"obs_payload", "obs_header", "chunk_payload", "chunk_header", "chunk_model", "chunk_robot"} <= set(
        first.tensors
    )
    assert first.tensors["obs_header"].size == 27 and first.tensors["obs_payload"].dtype == np.uint8
    assert (
        first.meta["client_uuid"] == "robot-217" and first.meta["schema_version"] == "1" and first.meta["rtc"] == "null"
    )
    assert first.meta["fingerprint"] == s.caps.fingerprint and first.meta["device"] == "cpu"
    assert not any(k.startswith("images.") for k in first.tensors), (
        "decoded pixels are no longer stored: the wire bytes are"
    )

    assert replay_main([str(cap)]) == 0
    out = capsys.readouterr().out
    assert "Replayed 3 captures: 3 byte-identical, 0 differ" in out, out


def test_replay_of_a_directory_that_is_no_capture_says_what_to_do(tmp_path, capsys):
    from lerobot_policy_remote.server.replay import main as replay_main

    assert replay_main([str(tmp_path)]) == 2
    assert "--debug.capture_dir=DIR" in capsys.readouterr().err


def _doc_value(text: str) -> object:
    """A default as docs/server.md writes it (`true`, 10, 10.0, `LINEAR`, `""`) as the Python value."""
    text = text.strip().strip("`")
    if text in ("true", "false"):
        return text == "true"
    if text in ('""', "[]"):
        return "" if text == '""' else []
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def test_the_manifest_table_in_server_md_gives_the_defaults_help_gives():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
    defaults = {name: default for name, _, default in manifest_fields()}
    compared = 0
    for line in docs.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`") or "*" in cells[0]:
            continue
        names = [n.strip().strip("`") for n in cells[0].split(",")]
        values = [v.strip() for v in cells[1].split(",")] if len(names) > 1 else [cells[1]]
        if len(values) != len(names) or not all(n in defaults for n in names):
            continue
        for name, value in zip(names, values, strict=True):
            if value in ("unset", "(required)", "`null`") or "MiB" in value:
                continue
            want = defaults[name]
            assert _doc_value(value) == want, f"docs/server.md says {name} defaults to {value}, --help says {want!r}"
            compared += 1
    assert compared >= 20
