"""The fake fleet mid-rollout: two ACT arms moved to a new model (v2, pinned by fingerprint), the rollout's status
in the store, and rollout commands recorded instead of sent."""

from __future__ import annotations

from dataclasses import replace

from lerobot_fleet.data.sources.fake import ACT, FakeSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.rollout import ModelRef, RolloutCommand, RolloutReply, RolloutRobot, RolloutStatus

ACT_V2 = Namespace(ACT.model_id, "v2", ACT.service)
FP_NEW = "9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6"
MOVED = ("arm-01", "arm-02")

STATUS = RolloutStatus(
    rollout_id="r-0042",
    phase="canary",
    service=ACT.service,
    from_model=ModelRef(ACT.model_id, ACT.revision, ""),
    to_model=ModelRef(ACT.model_id, "v2", FP_NEW),
    canary=0.25,
    robots=[
        *(RolloutRobot(r, "moved", FP_NEW) for r in MOVED),
        RolloutRobot("arm-03", "moving"),
        *(RolloutRobot(f"arm-0{i}", "waiting") for i in range(4, 9)),
    ],
    events=[
        "start by test-operator: canary 25% of 8 robots to lerobot/act_pick_place@v2",
        "arm-01 moved (streaming from 9f2c4e1a7b3d)",
        "arm-02 moved (streaming from 9f2c4e1a7b3d)",
    ],
    message="canary: 2 of 3 robots moved, 1 moving; promote or abort",
)


class RolloutFakeSource(FakeSource):
    """The fake fleet with a rollout under way; `rollout()` records each command and agrees."""

    def __init__(self, clock: object) -> None:
        super().__init__(clock)  # type: ignore[arg-type]
        self.commands: list[RolloutCommand] = []

    def start(self, store: FleetStore) -> None:
        super().start(store)
        for robot in MOVED:  # the new token first, then the old one goes: one row each
            tel, _ = self.telemetry(robot)
            store.on_robot_alive(robot, True, ACT_V2)
            store.on_robot_alive(robot, False, ACT)
            store.on_telemetry(replace(tel, revision="v2", fingerprint=FP_NEW, rtt_p50_ms=24.0, moves=1), ACT_V2)
        store.set_rollout(STATUS)

    def rollout(self, command: RolloutCommand) -> RolloutReply:
        self.commands.append(command)
        return RolloutReply(True, f"{command.action}: the router moves the rest", STATUS)
