"""Why the remote backend could not start, said once, at the end of `lerobot-rollout`'s output.

lerobot 0.6.1 calls `engine.start()` inside `strategy.setup()` with no handler but a `finally` that
tears the robot down, so our exception reaches the interpreter. We cannot catch it there; we can only
decide how the interpreter prints it: `install_excepthook()` prints a `RemoteStartupError` as its
message (the traceback only with LOG_LEVEL=DEBUG), and leaves every other exception to the default.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..advice import contract_advice
from ..discovery import ServiceInfo, no_server_report
from ..wire.codes import Refusal

if TYPE_CHECKING:
    from .handshake import HandshakeError

logger = logging.getLogger(__name__)
PREFIX = "Remote inference could not start: "
DEBUG_HINT = "(LOG_LEVEL=DEBUG prints the traceback; `lerobot-fleet doctor` checks the whole setup)"


class RemoteStartupError(RuntimeError):
    """A start failure whose message already says what to do; printed without a traceback."""


def router_unreachable(endpoint: str, zenoh_reason: str) -> RemoteStartupError:
    zenoh_reason = re.sub(r"\s+at \S+\.rs:\d+\.?", "", zenoh_reason).strip().rstrip(".")  # drop zenoh's Rust source path
    return RemoteStartupError(
        f"{PREFIX}cannot reach the Zenoh router at {endpoint!r} ({zenoh_reason}). Start the router "
        f"(lerobot-fleet router --listen {endpoint}) or fix --inference.connect_endpoint; for tls/ endpoints check "
        "--inference.tls_ca/tls_cert/tls_key (RUST_LOG=warn shows zenoh's reason). "
        f"Check with: lerobot-fleet doctor --router {endpoint}"
    )


def handshake_failed(list_services: Callable[[float], list[ServiceInfo]], request: Any, exc: HandshakeError) -> RemoteStartupError:
    """Turn the last handshake failure (a HandshakeError) into advice; lists the network's services when nobody answered."""
    if exc.code == Refusal.NO_SERVER:
        try:
            services = list_services(2.0)
        except Exception as err:  # listing is a courtesy: fall back to the namespace rule
            logger.debug("could not list services: %s", err)
            return RemoteStartupError(f"{PREFIX}{exc}")
        report = no_server_report(services, request.model_id, request.revision, request.service)
        return RemoteStartupError(f"{PREFIX}{report}")
    advice = contract_advice(exc.refusal)  # all replicas refused: the last one's reason (server_full, draining)
    return RemoteStartupError(f"{PREFIX}{exc}" + (f". To fix: {advice}" if advice else ""))


def _print_startup_error(exc_type: type[BaseException], exc: BaseException, tb: Any, previous: Any) -> None:
    if not issubclass(exc_type, RemoteStartupError):
        previous(exc_type, exc, tb)
        return
    if os.environ.get("LOG_LEVEL", "").upper() == "DEBUG":
        traceback.print_exception(exc_type, exc, tb)
    print(f"\nlerobot-rollout: {exc}\n{DEBUG_HINT}", file=sys.stderr, flush=True)


def install_excepthook() -> None:
    """Idempotent; chains to whatever hook was there before."""
    if getattr(sys.excepthook, "_remote_startup", False):
        return
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        _print_startup_error(exc_type, exc, tb, previous)

    hook._remote_startup = True  # type: ignore[attr-defined]
    sys.excepthook = hook
