"""What a server says reaches the robot's log printable (no terminal escapes, no forged lines).

The real engine through the in-memory link: a server event whose name and message carry escape sequences,
a carriage return and a newline, logged by the engine as one printable line."""

from __future__ import annotations

import logging
import re

import lerobot.rollout  # noqa: F401  (loads lerobot so the plugin registers)
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.testing.memory_link import MemoryLink

NAMES = ["j0.pos", "j1.pos"]
HW = {"observation.state": {"dtype": "float32", "shape": (2,), "names": NAMES}}
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "boom\x1b[2J\x1b]0;owned\x07\x9b31m\u202e\r\n2026-01-01 INFO forged line"


def test_a_servers_event_text_is_logged_printable(caplog):
    link = MemoryLink()
    cfg = RemoteInferenceConfig(rtc=RTCConfig(enabled=False), buffer_time_s=0.1, jpeg_quality=0)
    e = RemoteInferenceEngine(
        cfg, hw_features=HW, ordered_action_keys=NAMES, task="t", fps=30, model_id="m", transport=link
    )
    e.start(worker=False)
    e.resume()
    e.notify_observation({n: 1.0 for n in NAMES})
    try:
        e.step()
        request, _ = link.requests[-1]
        with caplog.at_level(logging.WARNING, logger="lerobot_policy_remote.engine.remote"):
            link.event("internal_error\x1b[5m", request, HOSTILE)
            link.deliver(b"\xc1 not a chunk \x1b[2J", request.pack())  # refused: its problem is logged too
            e.step()
        lines = [r.getMessage() for r in caplog.records]
        assert any("forged line" in m for m in lines), lines
        for m in lines:
            assert not UNSAFE.search(m), repr(m)
    finally:
        e.stop()
