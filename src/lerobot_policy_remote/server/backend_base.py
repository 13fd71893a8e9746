"""The model seam: what the server needs from a model (`Backend`), and the refusal of an observation it cannot take.

Why a module of its own: the worker, the seats and the stub backend depend on this contract only; the lerobot
policy behind it (backend.py) is loaded by the server's CLI alone.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from numpy.typing import NDArray

from ..wire.data import ObservationMsg
from ..wire.messages import ModelInfo, RtcSettings
from .capabilities import Capabilities
from .compiled import EngineStats


class Backend(abc.ABC):
    """What the server needs from a model. Subclass it; the abstract methods are required, the rest have defaults.

    A subclass sets `caps` and `model_info` in its constructor. Per-session state is whatever
    `new_session_state()` returns; the server hands it back on every call for that session.
    """

    caps: Capabilities
    model_info: ModelInfo

    @abc.abstractmethod
    def new_session_state(self) -> Any:
        """A fresh state for one robot session (e.g. its own copy of the processor pipelines)."""

    @abc.abstractmethod
    def on_session_open(self, state: Any) -> None:
        """Called once when the session is registered."""

    @abc.abstractmethod
    def reset_session(self, state: Any) -> None:
        """A new episode (or an explicit reset) for this session."""

    @abc.abstractmethod
    def validate_obs(self, obs: ObservationMsg) -> None:
        """Raise ObsContractError when a decoded observation does not fit the policy."""

    @abc.abstractmethod
    def infer(self, state: Any, obs: ObservationMsg, rtc: RtcSettings | None) -> tuple[NDArray[Any], NDArray[Any]]:
        """One chunk for one robot: (model-space chunk, robot-space chunk), each (T, A) float32."""

    # ------------------------------------------------------------------ optional: defaults
    @property
    def batches(self) -> bool:
        """Can any request of this backend share a forward pass (`can_batch` decides per request)? Default: no."""
        return False

    def can_batch(self, state: Any, obs: ObservationMsg, rtc: RtcSettings | None) -> bool:
        """May this request share a forward pass with others? Default: no (every request runs alone)."""
        return False

    @property
    def batches_rtc(self) -> bool:
        """Can RTC requests (each with its own delay and prefix) share a pass? Default: no."""
        return False

    def infer_batch(
        self, items: list[tuple[Any, ObservationMsg, RtcSettings | None]]
    ) -> list[tuple[NDArray[Any], NDArray[Any]]]:
        """One result per item, in order. Default: `infer` for each (a batching backend overrides this)."""
        return [self.infer(state, obs, rtc) for state, obs, rtc in items]

    def warmup(self, n: int, progress: Callable[[str], None] = print) -> None:
        """Run `n` throwaway inferences before serving. Default: nothing to warm up."""
        return None

    def compile_engine(self, max_batch: int, progress: Callable[[str], None] = print) -> None:
        """Compile the pass for batches up to `max_batch` before serving (`model.compile`). Default: nothing."""
        return None

    def engine_stats(self) -> EngineStats:
        """Which path serves (compiled or eager) and its counters, for `/metrics` and the status."""
        stats: EngineStats | None = getattr(self, "engine", None)
        return stats if stats is not None else EngineStats(reason="no compiled path")

    def bind_serving_thread(self) -> None:
        """Called once on the thread that serves (the inference worker) before its first pass. Default: nothing."""
        return None


class ObsContractError(ValueError):
    """An observation that decodes but does not fit the policy (missing camera, wrong state size)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")
