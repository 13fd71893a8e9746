"""One process-wide path for rollout key presses: the real keyboard and scripted sources share it.

lerobot 0.6.1's strategies read their controls (episodic's next/re-record/stop, highlight's save key,
dagger's pause/correct keys) only through `lerobot.utils.keyboard_input.create_key_listener(dispatch)`.
`install()` wraps that function (where it is defined and where the strategies imported it by name) so
every `dispatch` a strategy registers is also reachable by `press(name)`; the real listener is still
started as before. `press` is what the simulated leader arm's `key_script` and an operator's episode
reset from the console use, so a test drives a strategy exactly as a key press would.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_STRATEGY_MODULES = (
    "lerobot.utils.keyboard_input",
    "lerobot.rollout.strategies.dagger",
    "lerobot.rollout.strategies.highlight",
)
_lock = threading.Lock()
_dispatchers: list[Callable[[str], None]] = []


def press(name: str) -> int:
    """Deliver one key name (lerobot's canonical names: "right", "esc", "space", "n", ...) to every
    registered strategy control; returns how many received it."""
    with _lock:
        targets = list(_dispatchers)
    for dispatch in targets:
        try:
            dispatch(name)
        except Exception as exc:  # a strategy's handler error must not kill the caller's thread
            logger.warning("key %r: strategy control failed: %s", name, exc)
    if targets:
        logger.info("Key %r delivered to %d strategy control(s)", name, len(targets))
    return len(targets)


def registered() -> int:
    with _lock:
        return len(_dispatchers)


class _Listener:
    """The real listener (or None) plus our registration; `stop()` ends both."""

    def __init__(self, inner: Any, dispatch: Callable[[str], None]) -> None:
        self.inner = inner
        self._dispatch = dispatch

    def stop(self) -> None:
        with _lock:
            if self._dispatch in _dispatchers:
                _dispatchers.remove(self._dispatch)
        if self.inner is not None:
            self.inner.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def install() -> None:
    """Wrap `create_key_listener` once; idempotent."""
    import lerobot.utils.keyboard_input as kb

    if getattr(kb.create_key_listener, "_remote_wrapped", False):
        return
    original = kb.create_key_listener

    def create_key_listener(dispatch: Callable[[str], None], *args: Any, **kwargs: Any) -> _Listener:
        with _lock:
            _dispatchers.append(dispatch)
        return _Listener(original(dispatch, *args, **kwargs), dispatch)

    create_key_listener._remote_wrapped = True  # type: ignore[attr-defined]
    create_key_listener.__wrapped__ = original  # type: ignore[attr-defined]
    for modname in _STRATEGY_MODULES:  # modules imported later bind the wrapper from keyboard_input
        mod: Any = sys.modules.get(modname)
        if mod is not None and hasattr(mod, "create_key_listener"):
            mod.create_key_listener = create_key_listener
