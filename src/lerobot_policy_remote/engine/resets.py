"""The engine's episode resets: the acked reset query to the server, and resets an operator asks for (console).
A mixin of `RemoteInferenceEngine` (engine/remote.py keeps the worker loop, which calls these each pass).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..wire.messages import EpisodeResetAck, ResetRequest
from ..wire.text import printable

if TYPE_CHECKING:
    from .parts import EngineParts

# the engine's log lines keep one logger name wherever the code lives (users and tests filter on it)
logger = logging.getLogger(__package__ + ".remote")

_RESET_TIMEOUT_S = 1.0


class Resets:
    """Episode reset methods of `RemoteInferenceEngine`, run on its network worker."""

    def _server_reset(self: EngineParts) -> None:
        if self.reconnect.needed or not self.session_id:
            return
        try:
            ack = self.transport.server_reset(
                ResetRequest(session_id=self.session_id, episode_id=self.episode_id), _RESET_TIMEOUT_S
            )
        except Exception as exc:  # a reset failure is logged, never fatal
            logger.warning("Episode reset query failed: %s", exc)
            return
        if ack is None:
            logger.warning(
                "Episode reset was not acknowledged within %gs (continuing: requests are stateless)", _RESET_TIMEOUT_S
            )
        elif not ack.ok:
            logger.warning("Server refused the episode reset: %s", printable(ack.message, 300))

    def _apply_operator_resets(self: EngineParts) -> None:
        for query in self.transport.reset_queries():
            if self.on_operator_reset is not None and self.on_operator_reset(self.episode_id + 1):
                logger.info(
                    "Operator episode reset handed to the recording strategy: episode %d next", self.episode_id + 1
                )
                query.answer(
                    EpisodeResetAck(
                        ok=True,
                        message="episode reset: the recording ends this episode",
                        episode_id=self.episode_id + 1,
                    )
                )
                continue
            with self._reset_lock:
                self._local_reset()
            self._server_reset()
            logger.info("Operator episode reset applied: episode %d", self.episode_id)
            query.answer(EpisodeResetAck(ok=True, message="episode reset", episode_id=self.episode_id))
