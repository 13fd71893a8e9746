"""The queries a test asks the robot through `MemoryLink` (an operator's reset, a fleet router's move, a reader's
telemetry): each records the robot's one answer, and fails the test on a second one."""

from __future__ import annotations

import threading

from ..wire.messages import EpisodeResetAck, RobotTelemetry
from ..wire.rollout import MoveAck


class MemoryResetQuery:
    """An operator's episode-reset query; `ack` is set once the engine answered it."""

    def __init__(self) -> None:
        self.ack: EpisodeResetAck | None = None
        self.answered = threading.Event()

    def answer(self, ack: EpisodeResetAck) -> None:
        if self.answered.is_set():
            raise AssertionError("an episode-reset query was answered twice")
        self.ack = ack
        self.answered.set()


class MemoryMoveQuery:
    """A fleet router's move query (`payload`: the encoded `MoveCommand`, or any bytes); `ack` once answered."""

    def __init__(self, payload: bytes | None) -> None:
        self.payload = payload
        self.ack: MoveAck | None = None
        self.answered = threading.Event()

    def answer(self, ack: MoveAck) -> None:
        if self.answered.is_set():
            raise AssertionError("a move query was answered twice")
        self.ack = ack
        self.answered.set()


class MemoryTelemetryQuery:
    """A reader's telemetry query; `telemetry` is set once the engine answered it."""

    def __init__(self) -> None:
        self.telemetry: RobotTelemetry | None = None
        self.answered = threading.Event()

    def answer(self, telemetry: RobotTelemetry) -> None:
        if self.answered.is_set():
            raise AssertionError("a telemetry query was answered twice")
        self.telemetry = telemetry
        self.answered.set()
