"""The control thread's half of the engine: memory only, no I/O, never waits on the network."""

from __future__ import annotations

import logging
import time
from threading import Event, Lock
from typing import Any

import torch

from . import provenance
from .config import FallbackBehavior, RemoteInferenceConfig
from .fallback import fallback_action
from .link import LinkState, LinkStateMachine
from .queue import StampedActionQueue
from .telemetry import ProvenanceLog


class ControlSide:
    """A latest-only observation slot, and each tick's action: the next fresh one, else the fallback."""

    def __init__(
        self,
        cfg: RemoteInferenceConfig,
        queue: StampedActionQueue,
        states: LinkStateMachine,
        action_names: list[str],
        active: Event,
    ) -> None:
        self.cfg, self.queue, self.states, self.active = cfg, queue, states, active
        self.action_names = list(action_names)
        self.vel_mask = torch.tensor([k.endswith(".vel") for k in action_names])
        self._obs_lock = Lock()
        self._obs: tuple[dict[str, Any], float] | None = None  # (obs, monotonic time it was notified)
        self.last_action: torch.Tensor | None = None
        self.streaming_began = False  # this episode saw a merged chunk (gates the fallbacks)
        self.executed_count = 0
        self.fallback_count = 0
        self.prov_log = ProvenanceLog(logging.INFO if cfg.log_every_chunk else logging.DEBUG)  # logged by the worker
        self._logged_meta: object = None  # the chunk stamp last appended: the log wants each chunk's first action

    def notify(self, obs: dict[str, Any]) -> None:
        with self._obs_lock:
            self._obs = (obs, time.monotonic())

    def latest(self) -> tuple[dict[str, Any], float] | None:
        with self._obs_lock:
            return self._obs

    def new_episode(self) -> None:
        self.streaming_began = False
        self.last_action = None

    def get_action(self) -> torch.Tensor | None:
        """Every tick: no I/O, no logging, no torch op that gives up the GIL on the streaming path.

        The returned tensor wraps a row prepared at merge time (independent of the queue's tensors: see
        StampedActionQueue); `torch.from_numpy` shares the row's memory and keeps the GIL.
        """
        now = time.monotonic()
        item = self.queue.pop_fresh(now, self.cfg.max_action_age_s)
        if item is not None:
            row, src_t, meta = item
            action = torch.from_numpy(row)
            self.last_action = action
            self.streaming_began = True
            self.executed_count += 1
            age = now - src_t
            if meta is not self._logged_meta:  # one stamp per chunk (rows of a chunk share it): a new chunk began
                self._logged_meta = meta
                self.prov_log.executed.append((meta, age))
            provenance.publish(meta, age, self.states.state is not LinkState.STREAMING)
            return action
        provenance.publish(None, degraded=True)
        # Queue dry or only stale actions left: STALLED (the worker publishes the change).
        self.states.evaluate(now, 0, self.streaming_began, paused=not self.active.is_set())
        measured = self._measured() if self.last_action is None and self.cfg.fallback is FallbackBehavior.ZERO else None
        act = fallback_action(self.cfg.fallback, self.last_action, self.vel_mask, self.streaming_began, measured)
        if act is not None:
            self.fallback_count += 1
        return act

    def _measured(self) -> torch.Tensor | None:
        """The latest observation's value of each action feature, in action order (NaN where the robot reports none):
        what `zero` holds position joints at before the episode's first command (a fallback path: may allocate)."""
        latest = self.latest()
        if latest is None:
            return None
        obs = latest[0]
        return torch.tensor(
            [float(obs[k]) if k in obs else float("nan") for k in self.action_names], dtype=torch.float32
        )
