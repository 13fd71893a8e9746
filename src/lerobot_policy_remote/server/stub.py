"""A fixed-time model for benchmarks and scheduler tests (the same Backend seam as the real policy)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..wire.data import ObservationMsg
from ..wire.messages import ModelInfo, RtcSettings
from .backend_base import Backend, ObsContractError
from .capabilities import Capabilities


class StubBackend(Backend):
    """A fixed-time model for benchmarks and scheduler tests: chunk rows are the robot's own state + step index.

    Sleeping releases the GIL like a GPU forward does, so the threading picture matches a real server.
    """

    def __init__(
        self,
        infer_s: float,
        action_names: list[str],
        chunk_size: int = 10,
        max_sessions: int = 16,
        serving_mode: str = "shared",
        image_keys: tuple[str, ...] = (),
        per_robot_s: float | None = None,
        fingerprint: str = "stub" * 16,
    ) -> None:
        """`fingerprint`: the checkpoint it claims (two stubs with different ones stand for two models)."""
        self.infer_s = infer_s
        self.per_robot_s = (
            per_robot_s  # None: cannot batch; else a pass of B robots takes infer_s + per_robot_s * (B - 1)
        )
        n = len(action_names)
        self.caps = Capabilities(
            policy_type="stub",
            action_dim=n,
            action_names=list(action_names),
            image_keys=list(image_keys),
            image_shapes={k: (3, 96, 128) for k in image_keys},
            state_dim=n,
            state_key="observation.state",
            chunk_size=chunk_size,
            trained_fps=30.0,
            strict_fps=False,
            fps_tolerance=0.05,
            default_task="",
            pin_task=False,
            supports_rtc=False,
            serving_mode=serving_mode,
            max_sessions=1 if serving_mode == "exclusive" else max_sessions,
            fingerprint=fingerprint,
        )
        self.model_info = ModelInfo(
            repo_or_path="stub",
            revision="main",
            policy_type="stub",
            fingerprint=self.caps.fingerprint,
            dtype="float32",
            device="cpu",
        )
        self.calls = 0

    def new_session_state(self) -> dict[str, Any]:
        return {}

    def on_session_open(self, state: Any) -> None:
        pass

    def reset_session(self, state: Any) -> None:
        pass

    def validate_obs(self, obs: ObservationMsg) -> None:
        st = obs.state.get("observation.state")
        if st is None or st.size != self.caps.state_dim:
            raise ObsContractError("state.observation.state", f"expected {self.caps.state_dim} values")

    def infer(self, state: Any, obs: ObservationMsg, rtc: RtcSettings | None) -> tuple[NDArray[Any], NDArray[Any]]:
        time.sleep(self.infer_s)
        self.calls += 1
        return self._chunk(obs)

    @property
    def batches(self) -> bool:
        return self.per_robot_s is not None and self.caps.serving_mode == "shared"

    def can_batch(self, state: Any, obs: ObservationMsg, rtc: RtcSettings | None) -> bool:
        return self.batches and rtc is None

    def infer_batch(
        self, items: list[tuple[Any, ObservationMsg, RtcSettings | None]]
    ) -> list[tuple[NDArray[Any], NDArray[Any]]]:
        time.sleep(self.infer_s + (self.per_robot_s or 0.0) * (len(items) - 1))
        self.calls += 1
        return [self._chunk(obs) for _, obs, _ in items]

    def _chunk(self, obs: ObservationMsg) -> tuple[NDArray[Any], NDArray[Any]]:
        base = np.asarray(obs.state["observation.state"], dtype=np.float32).reshape(-1)
        steps = np.arange(self.caps.chunk_size, dtype=np.float32)[:, None]
        robot = base[None, :] + steps
        return robot - base[None, :], robot
