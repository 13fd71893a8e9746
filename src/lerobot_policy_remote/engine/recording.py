"""Recorded datasets with the remote backend: the per-frame `remote.degraded` mark and operator resets.

Why: a fleet records data while a shared policy drives it; a user must be able to drop the frames
taken while the link was not healthy, and an operator's episode reset from the console must end the
dataset episode too, not only the server-side one.

- `remote.degraded` (bool, shape (1,), lerobot's convention for per-frame flags like dagger's
  `intervention`) is added to every dataset the rollout *creates*, and filled on each `add_frame`
  from the tick's action: True when it was executed while the link was not STREAMING (DEGRADED,
  STALLED, CONNECTING after a reconnect, RECONNECTING) or was a fallback (`engine.provenance`).
  A resumed dataset without the feature is recorded as before.
- An operator reset (`lerobot-fleet reset`, the robot's `episode_reset` queryable) ends the dataset
  episode: in `episodic` by the "right" key through the strategy's own key path (`keypress`: the
  episode is saved, the reset phase runs, and the strategy's own `engine.reset()` starts the next
  server episode, whose id the operator's acknowledgement already names); in `sentry` and `dagger`
  (which have no such key) the engine resets at once and the episode in progress is saved before the
  first frame of the new server episode is added.
- An episode without a single frame (the server never answered in time) is skipped with a warning
  instead of ending the recording with lerobot's "add one or several frames" error.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from . import keypress, provenance

logger = logging.getLogger(__name__)

FEATURE = "remote.degraded"
SPEC = {"dtype": "bool", "shape": (1,), "names": None}


class DatasetFactory:
    """Stands in for `LeRobotDataset` inside `build_rollout_context`: `create` adds our feature."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def create(self, repo_id: str, fps: int, *args: Any, features: dict[str, Any], **kwargs: Any) -> Any:
        return self.real.create(repo_id, fps, *args, features={**features, FEATURE: dict(SPEC)}, **kwargs)

    def __getattr__(self, name: str) -> Any:  # resume, and anything else, unchanged
        return getattr(self.real, name)


def attach(dataset: Any, engine: Any, strategy_type: str) -> None:
    """Fill `remote.degraded` on every frame and make operator resets end the dataset episode."""
    marks = FEATURE in getattr(dataset, "features", {})
    pending: list[int] = []  # the server episode the next dataset episode starts with (sentry, dagger)
    add_frame = dataset.add_frame

    def add_frame_marked(frame: dict[str, Any]) -> None:
        if pending:
            prov = provenance.latest()
            if prov is None or prov.episode_id >= pending[0]:  # the first frame of the new server episode
                pending.clear()
                if dataset.has_pending_frames():
                    dataset.save_episode()
                    logger.info("Operator reset: dataset episode %d saved", dataset.num_episodes - 1)
        if marks and FEATURE not in frame:
            frame = {**frame, FEATURE: np.array([provenance.degraded()], dtype=bool)}
        add_frame(frame)

    dataset.add_frame = add_frame_marked
    save_episode = dataset.save_episode

    def save_episode_if_any(*args: Any, **kwargs: Any) -> Any:
        """An episode in which the robot executed nothing (no chunk came: the link's fault, not the data's)
        is skipped with a warning; lerobot's episodic loop would otherwise end the whole recording on it."""
        if dataset.has_pending_frames():
            return save_episode(*args, **kwargs)
        logger.warning(
            "Dataset episode %d has no frame (the robot executed no action in it): not saved", dataset.num_episodes
        )
        return None

    dataset.save_episode = save_episode_if_any

    def on_operator_reset(next_episode_id: int) -> bool:
        """Worker thread: deposits only. True: episodic ends the episode and resets the engine itself."""
        if strategy_type == "episodic":
            keypress.press("right")  # exactly what lerobot's keyboard listener would do
            return True
        pending[:] = [next_episode_id]
        return False

    if strategy_type in ("episodic", "sentry", "dagger"):  # highlight: its save key defines episodes
        engine.on_operator_reset = on_operator_reset
