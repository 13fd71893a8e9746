"""The operator queries, shared by the verbs and the console: status of every replica, drain, cordon, episode reset.

Each takes an open Zenoh session and returns decoded results or an `ActionResult` in the operator's
words; none keeps state, so the live source, the app's workers and `lerobot-fleet drain|reset|status`
all run the same code.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lerobot_policy_remote import discovery
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import ROLLOUT_CONTROL_KEY, ROLLOUT_STATUS_KEY, Namespace, ServiceKeys
from lerobot_policy_remote.wire.messages import (
    CordonAck,
    CordonRequest,
    DrainAck,
    DrainRequest,
    EpisodeResetAck,
    EpisodeResetCommand,
    ServerStatus,
)
from lerobot_policy_remote.wire.rollout import RolloutCommand, RolloutReply
from lerobot_policy_remote.wire.text import printable

from .sanitize import clean
from .sources.base import ActionResult

if TYPE_CHECKING:
    import zenoh

ANY = ServiceKeys.any()


def operator_name() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "operator"
    return f"{user}@{socket.gethostname()}"


def _reply_error(reply: Any) -> str:
    try:
        return printable(reply.err.payload.to_bytes().decode("utf-8", "replace"), 300)
    except Exception:
        return "error reply"


def query_statuses(session: Any, timeout: float = 2.0) -> list[tuple[ServerStatus, Namespace]]:
    """`get(.../server/*/status)` across every namespace (one implementation: `discovery`)."""
    return discovery.query_statuses(session, timeout)


def send_drain(
    session: Any, replica: str, ns: Namespace | None, reason: str, requested_by: str, timeout: float = 5.0
) -> ActionResult:
    keys = ns.keys if ns else ANY
    return _ask(
        session,
        keys.server(replica, "drain"),
        encode(DrainRequest(reason=reason, requested_by=requested_by)),
        timeout,
        DrainAck,
        replica,
        "drain",
        "server",
        lambda ack: ActionResult(
            ack.ok, replica, "drain", ack.message, sessions=tuple(ack.sessions), details={"pending": ack.pending}
        ),
    )


def send_cordon(
    session: Any, replica: str, ns: Namespace | None, cordon: bool, reason: str, requested_by: str, timeout: float = 5.0
) -> ActionResult:
    """Cordon (`cordon=True`: no new sessions, its sessions keep streaming) or uncordon one replica."""
    keys = ns.keys if ns else ANY
    action = "cordon" if cordon else "uncordon"

    def result(ack: CordonAck) -> ActionResult:
        kept = f"; {len(ack.sessions)} session(s) stay on it" if ack.ok and ack.cordoned and ack.sessions else ""
        return ActionResult(ack.ok, replica, action, ack.message + kept, details={"cordoned": ack.cordoned})

    return _ask(
        session,
        keys.server(replica, "cordon"),
        encode(CordonRequest(cordon, reason, requested_by)),
        timeout,
        CordonAck,
        replica,
        action,
        "server",
        result,
    )


def send_episode_reset(
    session: Any, robot_id: str, ns: Namespace | None, reason: str, requested_by: str, timeout: float = 5.0
) -> ActionResult:
    keys = ns.keys if ns else ANY
    return _ask(
        session,
        keys.robot(robot_id, "episode_reset"),
        encode(EpisodeResetCommand(reason=reason, requested_by=requested_by)),
        timeout,
        EpisodeResetAck,
        robot_id,
        "reset",
        "robot",
        lambda ack: ActionResult(ack.ok, robot_id, "reset", ack.message, episode_id=ack.episode_id),
    )


def _ask(
    session: Any,
    key: str,
    payload: bytes,
    timeout: float,
    ack_cls: type,
    target: str,
    action: str,
    who: str,
    result: Callable[[Any], ActionResult],
) -> ActionResult:
    """One operator query: the first acknowledgement that succeeded wins, else the first failure is shown."""
    results = []
    for reply in session.get(key, payload=payload, timeout=timeout):
        if reply.ok is None:
            results.append(ActionResult(False, target, action, _reply_error(reply)))
            continue
        try:
            results.append(result(clean(decode(ack_cls, reply.ok.payload.to_bytes()))))
        except WireError as exc:
            results.append(ActionResult(False, target, action, f"bad reply: {exc}"))
    if not results:
        return ActionResult(False, target, action, f"no {who} answered at {key}")
    ok = [r for r in results if r.ok]
    return ok[0] if ok else results[0]


def send_rollout(session: zenoh.Session, command: RolloutCommand, timeout: float = 5.0) -> RolloutReply:
    """A rollout command to the fleet router (`status` reads, the others act). A router that does not answer gives a
    failed reply that says so; the status inside is then empty."""
    key = ROLLOUT_STATUS_KEY if command.action == "status" else ROLLOUT_CONTROL_KEY
    failures: list[str] = []
    for reply in session.get(key, payload=encode(command), timeout=timeout):
        if reply.ok is None:
            failures.append(_reply_error(reply))
            continue
        try:
            return clean(decode(RolloutReply, reply.ok.payload.to_bytes()))
        except WireError as exc:
            failures.append(f"bad reply: {exc}")
    if failures:
        return RolloutReply(False, failures[0])
    return RolloutReply(
        False,
        f"no fleet router answered at {key}: rollouts are kept by `lerobot-fleet router` "
        "(start the fleet's router with it, or check that this certificate is an operator's)",
    )
