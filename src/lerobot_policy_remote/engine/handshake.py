"""Discovery + session open (protocol steps 1-2): pick a replica, open a session, classify failures."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import zenoh

from ..discovery import free_seats, key_vouches_for
from ..wire.codec import decode, encode
from ..wire.codes import CONTRACT_REFUSALS, Refusal
from ..wire.errors import WireError
from ..wire.keys import BRIEF_STATUS, ServiceKeys
from ..wire.messages import ServerStatus, SessionAck, SessionOpen
from ..wire.text import printable

logger = logging.getLogger(__name__)

MESSAGES = {
    Refusal.ACTION_MISMATCH: "Action name/order mismatch between server policy and this robot",
    Refusal.MODEL_MISMATCH: (
        "the server now runs a different model/revision/checkpoint than this session was opened with: "
        "refusing to execute its chunks"
    ),
}


class HandshakeError(Exception):
    """`fatal` errors end the rollout (contract violations); others are retried with backoff.

    `code`: why, as a value to match on (never the message's text). When every replica was tried
    (`code` is `Refusal.REFUSED`), `last` is the refusal of the last replica that said no (`server_full`,
    `draining`, ...), or None when none answered with a code.
    """

    def __init__(self, message: str, *, fatal: bool, code: Refusal, last: Refusal | None = None) -> None:
        super().__init__(message)
        self.fatal = fatal
        self.code = code
        self.last = last

    @property
    def refusal(self) -> Refusal:
        """The most specific code: the last replica's refusal when all were refused, else `code`."""
        return self.last if self.code == Refusal.REFUSED and self.last is not None else self.code


@dataclass
class OpenedSession:
    ack: SessionAck
    status: ServerStatus
    same_host: bool = False  # the link reaches this replica over shared memory (the transport decides)


def namespace_hint(keys: ServiceKeys, status_key: str) -> str:
    return (
        f"No policy server answered status query at '{status_key}'. Either the endpoint is wrong (check "
        "--inference.connect_endpoint, the router and firewalls) or the service namespace does not match: the robot "
        "uses (--inference.service_model_id [default --policy.path], --inference.service_revision [default main], "
        "--inference.service_task [default --task]) and the server (model.repo_or_path, model.revision, service_name "
        "[default default_task]). A task string that differs from the server's default_task is the most common cause."
    )


def reconnect_failure(exc: HandshakeError, last_replica: str) -> str:
    """Why a re-handshake failed, for the robot's log. A robot that had a session and now finds no replica of
    its service was not misconfigured: its server drained, stopped or is unreachable, so the
    namespace/endpoint advice of a first connection would mislead."""
    if exc.code == Refusal.NO_SERVER and last_replica:
        return (
            f"no policy server of this service answers any more (replica {last_replica} drained, stopped or is "
            "unreachable, and no other replica serves it); retrying until one is back: start or undrain a "
            "server (`lerobot-fleet status` lists them)"
        )
    return str(exc)


def rank(statuses: Sequence[ServerStatus], rng: random.Random | None = None) -> list[ServerStatus]:
    """The order to try replicas in: those with room first, then full ones, draining ones last.

    Among replicas with room, power of two choices: draw two at random weighted by free seats and
    take the one with more seats free (ties: lower load, then the draw). Robots that start together
    and read the same statuses spread over the replicas instead of all taking the first to answer.
    """
    roomy = [s for s in statuses if not s.draining and free_seats(s) > 0]
    full = sorted((s for s in statuses if not s.draining and free_seats(s) <= 0), key=lambda s: s.load)
    draining = [s for s in statuses if s.draining]
    ordered: list[ServerStatus] = []
    while roomy:
        first = _draw(roomy, rng)
        if len(roomy) > 1:
            second = _draw([s for s in roomy if s is not first], rng)
            first = min((first, second), key=lambda s: (-free_seats(s), s.load))
        ordered.append(first)
        roomy.remove(first)
    return ordered + full + draining


def _draw(candidates: list[ServerStatus], rng: random.Random | None) -> ServerStatus:
    """One replica, weighted by free seats; `rng` None: the module's shared generator."""
    choices = rng.choices if rng is not None else random.choices
    return choices(candidates, weights=[free_seats(s) for s in candidates])[0]


def discover(session: zenoh.Session, keys: ServiceKeys, timeout_s: float = 2.0) -> list[ServerStatus]:
    """All replicas that answered over Zenoh (`pick` orders them)."""
    key = keys.server("*", "status")
    found: list[ServerStatus] = []
    # Each replica answers on its own key; NONE keeps zenoh from folding several replicas into one reply.
    # BRIEF_STATUS: seats and load without the session list (a reply's size stays flat with the replica's sessions)
    for reply in session.get(f"{key}?{BRIEF_STATUS}", timeout=timeout_s, consolidation=zenoh.ConsolidationMode.NONE):
        if reply.ok is None:
            continue
        try:
            status = decode(ServerStatus, reply.ok.payload.to_bytes())
        except WireError as exc:
            logger.warning("Ignoring a malformed status reply on %s: %s", key, printable(exc, 300))
            continue
        if not key_vouches_for(status, str(reply.ok.key_expr)):
            logger.warning(
                "Ignoring a status reply on %s that claims replica %s", reply.ok.key_expr, printable(status.replica, 80)
            )
            continue
        found.append(status)
    if not found:
        raise HandshakeError(namespace_hint(keys, key), fatal=False, code=Refusal.NO_SERVER)
    return found


def ask_session(
    session: zenoh.Session, keys: ServiceKeys, replica: str, request: SessionOpen, timeout_s: float
) -> SessionAck | str:
    """One session-open query over Zenoh: the ack, or why there is none."""
    for reply in list(
        session.get(keys.session(replica, request.client_uuid), payload=encode(request), timeout=timeout_s)
    ):
        if reply.ok is not None:
            try:
                ack = decode(SessionAck, reply.ok.payload.to_bytes())
            except WireError as exc:
                return f"replica {replica} sent a malformed session ack: {exc}"
            if ack.replica != replica:  # only the replica asked may bind this robot
                return f"replica {replica}'s session ack names replica {printable(ack.replica, 80)}: ignored"
            return ack
    return f"replica {replica} did not answer the session open within {timeout_s:g}s"


def pick(
    statuses: list[ServerStatus], ask: Callable[[ServerStatus], SessionAck | str], expect_fingerprint: str = ""
) -> OpenedSession:
    """Try replicas in order (transport-free); `server_full`/`draining` move on, contract errors are fatal.

    With `expect_fingerprint` (the robot's pinned checkpoint) replicas serving another checkpoint are skipped: during a
    rollout two checkpoints share a namespace. When none serves it the error is fatal: a robot never binds to other
    weights (a replica naming no fingerprint is asked: the server checks `expect_fingerprint` itself)."""
    others = [s.replica for s in statuses if _serves_other(s, expect_fingerprint)]
    if others and len(others) == len(statuses):
        raise HandshakeError(
            MESSAGES[Refusal.MODEL_MISMATCH] + f" (replica {', '.join(others[:4])})",
            fatal=True,
            code=Refusal.MODEL_MISMATCH,
        )
    last, last_code = "", None
    for status in rank([s for s in statuses if not _serves_other(s, expect_fingerprint)]):
        if status.draining:
            last, last_code = f"replica {status.replica} is draining", Refusal.DRAINING
            continue
        ack = ask(status)
        if isinstance(ack, str):
            if not last:
                last, last_code = ack, None
            continue
        if ack.ok:
            return OpenedSession(ack=ack, status=status)
        code = Refusal.parse(ack.code)
        msg = (MESSAGES.get(code, "") if code is not None else "") or ack.message or ack.code
        if ack.message and ack.message not in msg:
            msg = ack.message if ack.message.startswith(msg) else f"{msg}: {ack.message}"
        if code in CONTRACT_REFUSALS:
            raise HandshakeError(
                f"session refused by replica {status.replica} ({ack.code}): {msg}", fatal=True, code=code
            )
        if code == Refusal.SERVER_FULL and "server full" not in msg:
            msg = f"server full: {ack.active_sessions}/{ack.max_sessions} sessions active"
        last, last_code = f"replica {status.replica}: {msg}", code
    raise HandshakeError(last or "no replica accepted the session", fatal=False, code=Refusal.REFUSED, last=last_code)


def _serves_other(status: ServerStatus, expect_fingerprint: str) -> bool:
    """The replica names a checkpoint, and not the expected one."""
    fp = status.model.fingerprint
    return bool(expect_fingerprint and fp and fp != expect_fingerprint)


def open_session(
    session: zenoh.Session,
    keys: ServiceKeys,
    request: SessionOpen,
    timeout_s: float,
    expect_fingerprint: str = "",
    known: Sequence[ServerStatus] = (),
    seen: list[ServerStatus] | None = None,
) -> OpenedSession:
    """Discovery + session open over a Zenoh session (protocol steps 1-2).

    `known`: replicas from an earlier discovery, tried first without asking every replica for its status (a drain
    moves hundreds of robots at once: their status queries queued behind each other on the replicas' links and
    doubled each move). Seats there may be stale; any non-fatal refusal falls back to a fresh discovery, which is
    written into `seen` for the next time."""

    def ask(st: ServerStatus) -> SessionAck | str:
        return ask_session(session, keys, st.replica, request, timeout_s)

    candidates = [st for st in known if not st.draining]
    if candidates:
        try:
            return pick(candidates, ask, expect_fingerprint)
        except HandshakeError as exc:
            # none of the known replicas serving our checkpoint is no verdict: a rollout may have started another
            # replica of it since; the fresh discovery below decides
            if exc.fatal and exc.code != Refusal.MODEL_MISMATCH:
                raise
    statuses = discover(session, keys)
    if seen is not None:
        seen[:] = statuses
    return pick(statuses, ask, expect_fingerprint)
