"""The adaptive telemetry pacer: a state change goes at once, a quiet robot slows down to its ceiling."""

from lerobot_policy_remote.engine.telemetry import TelemetryPacer


def sends(p: TelemetryPacer, version: int, times: list[float]) -> list[float]:
    return [t for t in times if p.due(version, t)[0]]


def test_quiet_robot_doubles_its_period_up_to_the_ceiling():
    p = TelemetryPacer(0.5, 4.0)
    ticks = [i * 0.05 for i in range(0, 400)]  # 20 s at the worker's pace
    sent = sends(p, 7, ticks)
    gaps = [round(b - a, 2) for a, b in zip(sent, sent[1:], strict=False)]
    assert gaps[:4] == [0.5, 1.0, 2.0, 4.0]
    assert all(g == 4.0 for g in gaps[3:])
    assert len(sent) < 20 / 0.5 / 3  # far fewer messages than the fixed 0.5 s rate


def test_state_change_is_sent_at_once_and_resets_the_period():
    p = TelemetryPacer(0.5, 4.0)
    for t in (0.0, 0.5, 1.5, 3.5):
        assert p.due(1, t) == (True, t == 0.0)
    assert p.due(1, 5.0) == (False, False)  # period now 4 s
    assert p.due(2, 5.01) == (True, True)  # a change: immediately
    assert p.due(2, 5.4) == (False, False)
    assert p.due(2, 5.51)[0]  # back at the fast period


def test_fixed_rate_when_ceiling_equals_period():
    p = TelemetryPacer(1.0)
    sent = sends(p, 0, [i * 0.1 for i in range(101)])
    assert [round(t, 1) for t in sent] == [float(i) for i in range(11)]


def test_force_sends_without_a_change():
    p = TelemetryPacer(1.0, 8.0)
    assert p.due(0, 0.0)[0]
    assert p.due(0, 0.1, force=True) == (True, False)


class _Sent:
    def __init__(self) -> None:
        self.items = []

    def publish_telemetry(self, t) -> None:
        self.items.append(t)

    def telemetry_queries(self) -> list:
        return []


def test_engine_reports_staleness_crossing_its_alert_level_at_once_while_slowed_down(monkeypatch):
    """A quiet robot's telemetry has backed off to 8 s; its staleness crossing 2/3 of max_action_age_s is sent at
    once."""
    import time
    import types

    import numpy as np
    import torch
    from lerobot.policies.rtc.configuration_rtc import RTCConfig

    from lerobot_policy_remote.engine import remote, reporting
    from lerobot_policy_remote.engine.config import RemoteInferenceConfig
    from lerobot_policy_remote.engine.provenance import Provenance
    from lerobot_policy_remote.engine.remote import RemoteInferenceEngine

    skew = [0.0]  # the engine's clock runs this far ahead of the real one: quiet time passes without waiting

    def monotonic() -> float:
        return time.monotonic() + skew[0]

    monkeypatch.setattr(remote, "time", types.SimpleNamespace(monotonic=monotonic))
    monkeypatch.setattr(reporting, "time", types.SimpleNamespace(monotonic=monotonic))  # the telemetry's clock
    cfg = RemoteInferenceConfig(
        rtc=RTCConfig(enabled=False), telemetry_period_s=0.5, telemetry_max_period_s=8.0, max_action_age_s=3.0
    )
    e = RemoteInferenceEngine(cfg, hw_features={}, ordered_action_keys=["a.pos"], task="t", fps=30, model_id="m")
    sent = _Sent()
    e.transport = sent  # type: ignore[assignment]
    e.report_telemetry()
    for _ in range(4):  # back off: the pacer's period doubles on each unchanged send
        skew[0] += 100.0
        e.report_telemetry()
    n = len(sent.items)
    e.report_telemetry()
    assert len(sent.items) == n  # nothing changed: nothing sent
    rows = torch.from_numpy(np.zeros((30, 1), np.float32))
    # staleness 2.5 s >= 2 s
    e.queue.merge_stamped(rows, rows, 0, None, monotonic() - 2.5, Provenance("s", 1, e.episode_id))
    e.report_telemetry()
    assert len(sent.items) == n + 1 and sent.items[-1].staleness_s >= 2.0
