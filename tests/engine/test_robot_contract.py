"""The policy contract, robot side through the in-memory link: rename_map on the wire, the unchecked action order,
the negotiated schema version, the late-reply rule, and the per-chunk round-trip split (log + telemetry)."""

from __future__ import annotations

import logging
import time

import lerobot.rollout  # noqa: F401  (loads lerobot so the plugin registers)
import numpy as np
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine import request as req
from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.testing.memory_link import MemoryLink, MemoryReplica
from lerobot_policy_remote.wire.header import Header, MsgType

NAMES = [f"j{i}.pos" for i in range(3)]
HW = {
    "observation.state": {"dtype": "float32", "shape": (3,), "names": NAMES},
    "observation.images.front": {"dtype": "image", "shape": (8, 8, 3), "names": ["height", "width", "channels"]},
}
OBS = {**{n: 1.0 for n in NAMES}, "front": np.zeros((8, 8, 3), np.uint8)}
RENAME = {"observation.images.front": "observation.images.top"}


def engine(link: MemoryLink, clock=None, **kw) -> RemoteInferenceEngine:
    cfg = RemoteInferenceConfig(**{"rtc": RTCConfig(enabled=False), "buffer_time_s": 0.1, "jpeg_quality": 0, **kw})
    extra = {"request_clock_ns": clock} if clock else {}
    e = RemoteInferenceEngine(
        cfg,
        hw_features=HW,
        ordered_action_keys=NAMES,
        task="t",
        fps=30,
        model_id="m",
        transport=link,
        rename_map=RENAME,
        **extra,
    )
    e.start(worker=False)
    e.resume()
    e.notify_observation(OBS)
    return e


def test_rename_map_puts_the_policy_names_on_the_wire():
    link = MemoryLink()
    e = engine(link)
    opened = link.replicas["mem-1"].sessions[-1]
    assert {f.name for f in opened.features} == {"observation.state", "observation.images.top"}
    e.step()
    _, obs = link.requests[-1]
    assert set(obs.images) == {"observation.images.top"} and set(obs.state) == {"observation.state"}
    # pure: the unmapped keys stay, exactly like lerobot's rename step
    assert req.renamed("observation.state", RENAME) == "observation.state" and req.renamed("x", None) == "x"
    e.stop()


def test_unchecked_action_order_is_a_warning_at_start_and_in_telemetry(caplog):
    with caplog.at_level(logging.WARNING, logger="lerobot_policy_remote.engine.remote"):
        e = engine(MemoryLink(MemoryReplica("mem-1", names_checked=False)))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(w.startswith("Action order NOT checked") and "action_feature_names" in w for w in warnings), warnings
    assert e.telemetry().action_order == "unchecked"
    e.stop()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lerobot_policy_remote.engine.remote"):
        e = engine(MemoryLink(MemoryReplica("mem-1", names_checked=True)))
    assert not any("Action order NOT checked" in r.getMessage() for r in caplog.records)
    assert e.telemetry().action_order == "checked"
    e.stop()


def test_the_robot_speaks_the_negotiated_schema_and_refuses_chunks_of_another(monkeypatch):
    import lerobot_policy_remote.engine.session as session_mod

    monkeypatch.setattr(session_mod, "SCHEMA_MAX", 2)  # a robot that speaks 1..2 meets a server that chose 2
    link = MemoryLink(MemoryReplica("mem-1", schema_version=2))
    e = engine(link)
    e.step()
    h, _ = link.requests[-1]
    assert h.schema_version == 2, "requests carry the negotiated version, not the robot's own constant"
    link.reply(
        h, np.ones((10, 3)), header=Header(1, MsgType.CHUNK, h.seq_id, h.episode_id, h.client_mono_ns, h.session_epoch)
    )
    e.step()
    assert e.counters["schema_mismatch"] == 1 and e.counters["chunks"] == 0
    e.step()  # the refused chunk failed the request: a new one goes out
    h2, _ = link.requests[-1]
    link.reply(h2, np.ones((10, 3)))  # the server's own version: merged
    e.step()
    assert e.counters["chunks"] == 1 and e.state is LinkState.STREAMING
    e.stop()


def test_an_ack_in_a_version_the_robot_does_not_speak_is_fatal():
    e = RemoteInferenceEngine(
        RemoteInferenceConfig(rtc=RTCConfig(enabled=False), connect_timeout_s=1),
        hw_features=HW,
        ordered_action_keys=NAMES,
        task="t",
        fps=30,
        model_id="m",
        transport=MemoryLink(MemoryReplica("mem-1", schema_version=7)),
    )
    with pytest.raises(Exception, match="schema version 7"):
        e.start(worker=False)


def test_a_late_reply_to_the_latest_request_is_merged_an_older_one_is_dropped():
    link = MemoryLink()
    e = engine(link, request_timeout_s=0.05)
    e.step()
    first, _ = link.requests[-1]

    def timed_out() -> bool:  # the request's own timeout passed: this test is about what happens after it
        return e.requests.age(time.monotonic()) > 0.05

    wait_until(timed_out, timeout=5, message="the first request passing its 50 ms timeout")
    e.pause()  # the control loop stops asking: the timed-out request stays the latest one
    e.step()
    assert e.counters["timeouts"] == 1 and len(link.requests) == 1
    link.reply(first, np.ones((10, 3)))  # late, but it answers the latest request
    e.step()
    assert e.counters["chunks"] == 1 and e.counters["late_merged"] == 1 and e.counters["late_dropped"] == 0
    assert e.state is LinkState.STREAMING

    # once a newer request went out, the old one's reply is dropped
    e.resume()
    e.notify_observation(OBS)
    while e.queue.qsize():
        e.get_action()
    e.step()
    second, _ = link.requests[-1]
    assert second.seq_id == first.seq_id + 1
    wait_until(timed_out, timeout=5, message="the second request passing its timeout")
    e.step()  # times out and a third request goes out at once
    third, _ = link.requests[-1]
    assert third.seq_id == second.seq_id + 1
    link.reply(second, np.ones((10, 3)))
    e.step()
    assert e.counters["late_dropped"] == 1 and e.counters["chunks"] == 1
    e.stop()


@pytest.mark.parametrize(("every_chunk", "level"), [(False, logging.DEBUG), (True, logging.INFO)])
def test_each_chunk_logs_and_reports_queue_wait_inference_and_network(caplog, every_chunk, level):
    """The per-chunk lines are DEBUG unless `--inference.log_every_chunk` asks for them at INFO."""
    ticks = iter([1_000_000_000, 1_120_000_000])  # request clock at send and at merge: RTT 120 ms
    link = MemoryLink()
    e = engine(link, clock=lambda: next(ticks), log_every_chunk=every_chunk)
    e.step()
    h, _ = link.requests[-1]
    link.reply(h, np.ones((10, 3)), queue_wait_ms=15.0, inference_ms=80.0)
    with caplog.at_level(logging.DEBUG, logger="lerobot.remote"):
        e.step()
        e.control.get_action()
        e.step()
    chunk = next(r for r in caplog.records if r.name == "lerobot.remote.chunks")
    executing = next(r for r in caplog.records if r.name == "lerobot.remote.provenance")
    assert chunk.levelno == executing.levelno == level
    line = chunk.getMessage()
    assert f"session_id={e.session_id} seq_id={h.seq_id}" in line
    assert "rtt=120.0ms queue_wait=15.0ms inference=80.0ms network=25.0ms" in line, line
    assert f"executing session_id={e.session_id} seq_id={h.seq_id}" in executing.getMessage()
    t = e.telemetry()
    assert (t.queue_wait_ms_p50, t.inference_ms_p50, t.network_ms_p50) == pytest.approx((15.0, 80.0, 25.0))
    e.stop()


def test_a_streaming_robot_says_so_at_info_at_most_once_per_period(caplog, monkeypatch):
    """Without per-chunk lines a terminal still shows progress: a line at the session's first chunk, then one per
    period while chunks merge, none while idle."""
    from lerobot_policy_remote.engine.telemetry import StreamSummary

    monkeypatch.setattr(StreamSummary, "period_s", 0.2)
    link = MemoryLink()
    e = engine(link)
    t0 = time.monotonic()
    with caplog.at_level(logging.DEBUG):
        while time.monotonic() - t0 < 1.0:
            e.step()
            if link.requests:
                h, _ = link.requests.pop()
                link.reply(h, np.ones((10, 3)))
            e.control.get_action()
            time.sleep(0.01)
        idle = time.monotonic()
        while time.monotonic() - idle < 0.5:  # nothing merged: nothing to say
            e.step()
            time.sleep(0.01)
    robot_loggers = ("lerobot.remote", "lerobot_policy_remote.engine")
    info = [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith(robot_loggers)]
    summaries = [r.getMessage() for r in info if r.getMessage().startswith("Streaming from replica")]
    assert 4 <= len(summaries) <= 6, summaries
    assert "first chunk merged" in summaries[0] and all("round trip p50" in s for s in summaries)
    assert all(" chunks in the last " in s for s in summaries[1:])
    assert not [r for r in info if r.name in ("lerobot.remote.chunks", "lerobot.remote.provenance")]
    assert len(info) <= 1.5 / 0.2 + 3  # the link-state lines and the summaries: nothing per chunk
    e.stop()


def test_a_clean_run_against_a_policy_without_rtc_warns_only_about_the_action_order(caplog):
    """RTC downgraded for a policy without RTC is INFO; the only WARNING of a clean run is the
    unchecked action order (docs/user-guide.md lists exactly that)."""
    with caplog.at_level(logging.INFO, logger="lerobot_policy_remote"):
        e = engine(MemoryLink(MemoryReplica("mem-1", names_checked=True, rtc=False)), rtc=RTCConfig(enabled=True))
        e.step()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any(r.levelno == logging.INFO and "has no RTC" in r.getMessage() for r in caplog.records)
    e.stop()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="lerobot_policy_remote"):
        e = engine(MemoryLink(MemoryReplica("mem-1", names_checked=False, rtc=False)), rtc=RTCConfig(enabled=True))
        e.step()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("Action order NOT checked"), warnings
    e.stop()


@pytest.mark.parametrize(
    ("replica_rtc", "robot_rtc", "expected"), [(True, True, "on"), (False, True, "off"), (True, False, "off")]
)
def test_telemetry_says_whether_the_session_runs_rtc(replica_rtc, robot_rtc, expected):
    """`rtc` is the session's own verdict: on only when the server offers RTC and the robot wants it; "" before a
    session."""
    link = MemoryLink(MemoryReplica("mem-1", rtc=replica_rtc))
    fresh = RemoteInferenceEngine(
        RemoteInferenceConfig(rtc=RTCConfig(enabled=robot_rtc)),
        hw_features=HW,
        ordered_action_keys=NAMES,
        task="t",
        fps=30,
        model_id="m",
        transport=link,
    )
    assert fresh.telemetry().rtc == ""
    e = engine(link, rtc=RTCConfig(enabled=robot_rtc))
    assert (e.rtc_active, e.telemetry().rtc) == (expected == "on", expected)
    e.stop()
