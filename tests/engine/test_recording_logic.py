"""Recording helpers without processes: the key path, the leader's script and pose, the dataset mark."""

from __future__ import annotations

import numpy as np
import pytest

from lerobot_policy_remote.engine import keypress, provenance, recording
from lerobot_policy_remote.sim.teleop import SimLeader, SimLeaderConfig, parse_key_script


def test_a_press_reaches_the_controls_lerobot_strategies_register():
    """episodic's events dict is filled by lerobot's own `init_keyboard_listener` dispatch."""
    from lerobot.utils import keyboard_input

    keypress.install()
    listener, events = keyboard_input.init_keyboard_listener()
    try:
        assert keypress.press("right") >= 1
        assert events["exit_early"] and not events["stop_recording"]
        keypress.press("esc")
        assert events["stop_recording"]
    finally:
        listener.stop()
    before = keypress.registered()
    keypress.press("right")  # a stopped listener no longer receives keys
    assert keypress.registered() == before


def test_key_script_parses_and_refuses_bad_items():
    assert parse_key_script("2:tab, 1.5:space,3:esc") == [(1.5, "space"), (2.0, "tab"), (3.0, "esc")]
    assert parse_key_script("") == []
    for bad in ("space", "x:space", "1:", "-1:s", "nan:s"):
        with pytest.raises(ValueError, match="SECONDS:KEY"):
            parse_key_script(bad)


def test_leader_pose_is_deterministic(tmp_path):
    lead = SimLeader(SimLeaderConfig(calibration_dir=tmp_path, amplitude=10, period_s=4))
    assert lead.pose(0.0) == lead.pose(0.0)
    assert lead.pose(1.0)["shoulder_pan.pos"] == pytest.approx(10.0)  # quarter period of a sine, phase 0
    assert set(lead.action_features) == set(lead.pose(0.0))


class _Dataset:
    features = {recording.FEATURE: recording.SPEC}

    def __init__(self) -> None:
        self.frames: list[dict] = []
        self.saved: list[int] = []
        self.num_episodes = 0

    def add_frame(self, frame: dict) -> None:
        self.frames.append(frame)

    def has_pending_frames(self) -> bool:
        return len(self.frames) > sum(self.saved)

    def save_episode(self) -> None:
        self.saved.append(len(self.frames) - sum(self.saved))
        self.num_episodes += 1


class _Engine:
    on_operator_reset = None


def test_frames_carry_the_ticks_mark_and_a_sentry_reset_saves_before_the_new_episode():
    ds, eng = _Dataset(), _Engine()
    recording.attach(ds, eng, "sentry")
    old = provenance.Provenance("s", 1, episode_id=1)
    provenance.publish(old, 0.0, degraded=False)
    ds.add_frame({"action": 0})
    provenance.publish(old, 0.0, degraded=True)
    ds.add_frame({"action": 1})
    assert eng.on_operator_reset(2) is False  # the engine resets itself
    ds.add_frame({"action": 2})  # still an action of episode 1: same dataset episode
    provenance.publish(provenance.Provenance("s", 2, episode_id=2), 0.0)
    ds.add_frame({"action": 3})
    ds.save_episode()
    assert ds.saved == [3, 1]
    assert [bool(f[recording.FEATURE][0]) for f in ds.frames] == [False, True, True, False]
    assert all(f[recording.FEATURE].dtype == np.bool_ for f in ds.frames)
    ds.save_episode()  # nothing pending: skipped, not lerobot's error
    assert ds.saved == [3, 1]
    provenance.publish(None)
