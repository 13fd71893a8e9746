"""Sessions, their latest-only mailboxes, and the registry (one lock, short critical sections)."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import zenoh

from ..wire.codec import encode
from ..wire.codes import EventKind
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.messages import EventMsg, RtcSettings, SessionInfo, SessionOpen

if TYPE_CHECKING:  # a mail holds a decoded observation; decode_pool.py, not this module, decodes it
    from ..wire.data import ObservationMsg

log = logging.getLogger("lerobot.policy_server")


INTERVAL_GAIN = 0.25  # weight of the newest gap in a mailbox's smoothed arrival interval


@dataclass
class Mail:
    """One raw observation as deposited by the zenoh callback (decoded later, off the callback)."""

    payload: bytes
    attachment: bytes | None
    t_arrival: float  # time.perf_counter() at deposit
    size: int = 0  # bytes on the wire (payload is left empty when it exceeds the limit)
    # Decoding (server/decode_pool.py): whoever holds `claim` decodes; the result or its WireError lands here.
    claim: threading.Lock = field(default_factory=threading.Lock)
    decoded: ObservationMsg | WireError | None = None
    decoded_by: str | None = None  # the thread that decoded it (tests: decode runs off the worker)
    stale: bool = False  # superseded in its mailbox: not worth decoding


class Mailbox:
    """Newest wins: a deposit over an unread observation supersedes it (counted, reported in the next chunk)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mail: Mail | None = None
        self.superseded_pending = 0  # superseded since the last chunk was sent
        self.superseded_total = 0
        self.last_arrival = float("-inf")  # t_arrival of the newest deposit
        self.interval: float | None = (
            None  # smoothed time between deposits: when is this robot's next one due (batch window)?
        )

    def deposit(self, mail: Mail) -> bool:
        """Returns True when an unread observation was replaced."""
        with self._lock:
            gap = mail.t_arrival - self.last_arrival
            if not math.isinf(gap):
                self.interval = gap if self.interval is None else self.interval + INTERVAL_GAIN * (gap - self.interval)
            self.last_arrival = mail.t_arrival
            old = self._mail
            replaced = old is not None
            if old is not None:
                old.stale = True
                self.superseded_pending += 1
                self.superseded_total += 1
            self._mail = mail
            return replaced

    def take(self) -> tuple[Mail | None, int]:
        with self._lock:
            mail, self._mail = self._mail, None
            sup, self.superseded_pending = (
                (self.superseded_pending, 0) if mail is not None else (0, self.superseded_pending)
            )
            return mail, sup

    def pending(self) -> bool:
        return self._mail is not None

    def peek(self) -> Mail | None:
        """The unread observation, left in place."""
        return self._mail

    def clear(self) -> None:
        with self._lock:
            self._mail = None


@dataclass(eq=False)  # a session is itself: `in`, sets and dicts compare identity, never every field
class Session:
    session_id: str
    client_uuid: str
    state: Any  # the backend's per-session state (processor pipeline copies)
    rtc: RtcSettings | None  # None: chunk-append mode
    schema_version: int
    task: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    episode_id: int = 0
    requests: int = 0
    errors: int = 0
    mailbox: Mailbox = field(default_factory=Mailbox)
    opened_at: float = field(default_factory=time.monotonic)
    last_obs: float = field(default_factory=time.monotonic)  # monotonic time of the robot's last observation (or open)
    gone_since: float | None = None  # monotonic time the robot's liveliness token disappeared
    closed: bool = False
    pub: Any = None  # the zenoh publisher on this robot's action key (docs/wire.md QoS)
    pub_batched: Any = None  # the same key and QoS, not express: a pass's chunks but its last (Worker._run)
    direct_pub: Any = None  # the same key on the loopback link (server/direct.py), when this server offers one
    via_direct: bool = False  # the latest observation came over the loopback link: reply on it
    pending_reset: int | None = None  # episode id of an acked reset, applied by the worker
    # The reply negotiated at open: float16 when a chunk fits within reply_max_error, model space or not.
    reply_dtype: str = "float32"
    reply_max_error: float = 0.0
    reply_model_space: bool = True

    def info(self) -> SessionInfo:
        """For status replies, which any robot may read: the id's first 8 hex digits name it, never act for it."""
        return SessionInfo(
            self.session_id[:SESSION_ID_SHOWN],
            self.client_uuid,
            self.episode_id,
            self.requests,
            self.mailbox.superseded_total,
            self.errors,
            dict(self.tags),
        )

    def event_message(self, event: EventKind, message: str, header: Header | None) -> tuple[bytes, bytes]:
        """An event's payload and attachment (echoing the request's header when there is one)."""
        h = Header(
            self.schema_version,
            MsgType.EVENT,
            header.seq_id if header else 0,
            header.episode_id if header else self.episode_id,
            header.client_mono_ns if header else 0,
            header.session_epoch if header else 0,
        )
        return encode(EventMsg(event, message, self.session_id, h.seq_id)), h.pack()

    @property
    def out(self) -> Any:
        """The publisher replies take: the way this robot's latest observation came (router or loopback link)."""
        return self.direct_pub if self.via_direct and self.direct_pub is not None else self.pub

    def out_batched(self) -> Any:
        """The publisher for a chunk that a later express put on the same link flushes: queued, not written at once."""
        if self.via_direct and self.direct_pub is not None:
            return self.direct_pub
        return self.pub_batched if self.pub_batched is not None else self.pub

    def send_event(self, event: EventKind, message: str, header: Header | None) -> None:
        """Anything that is not a chunk, on the robot's action key (this session's publisher: droppable, express)."""
        payload, attachment = self.event_message(event, message, header)
        try:
            self.out.put(payload, attachment=attachment)
        except Exception:
            log.debug("event publish failed (session closed?)", exc_info=True)


SESSION_ID_SHOWN = 8


def declare_action_publisher(z: Any, key: str, express: bool = True) -> Any:
    """A robot's action key: chunks and events, droppable, express, at the robot-facing priority.

    `express=False` for the chunks of a pass but its last: each express put is its own socket write (~30 us of
    CPU each), and a burst of 32 of them overflowed the TX queue (chunks dropped); queued, they leave in one batch
    that the pass's last (express) chunk flushes, as it shares their priority queue."""
    return z.declare_publisher(
        key,
        congestion_control=zenoh.CongestionControl.DROP,
        priority=zenoh.Priority.INTERACTIVE_HIGH,
        express=express,
        reliability=zenoh.Reliability.RELIABLE,
    )


def new_session_id() -> str:
    return uuid.uuid4().hex


class Registry:
    """client_uuid -> Session plus the round-robin ring. Mutated by control queryables and housekeeping."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._by_client: dict[str, Session] = {}
        self._ring: list[Session] = []  # sessions in open order
        self._pos: dict[str, int] = {}  # client uuid -> its index in the ring (served() is O(1), not a list scan)
        self._cursor = 0  # ring index after the last served session

    def get(self, client_uuid: str) -> Session | None:
        return self._by_client.get(client_uuid)  # dict read is atomic; callbacks use this lock-free

    def by_session_id(self, session_id: str) -> Session | None:
        with self.lock:
            return next((s for s in self._by_client.values() if s.session_id == session_id), None)

    def add(self, session: Session) -> Session | None:
        """Insert, replacing (and returning) this client's previous session (it keeps the old one's ring place)."""
        with self.lock:
            old = self._by_client.get(session.client_uuid)
            if old is not None:
                old.closed = True
                self._ring[self._pos[session.client_uuid]] = session
            else:
                self._pos[session.client_uuid] = len(self._ring)
                self._ring.append(session)
            self._by_client[session.client_uuid] = session
            return old

    def remove(self, client_uuid: str) -> Session | None:
        with self.lock:
            s = self._by_client.pop(client_uuid, None)
            if s is not None:
                s.closed = True
                i = self._pos.pop(client_uuid)
                self._ring.pop(i)
                for k in range(i, len(self._ring)):  # O(sessions) on a close only
                    self._pos[self._ring[k].client_uuid] = k
                if i < self._cursor:
                    self._cursor -= 1
                if self._ring:
                    self._cursor %= len(self._ring)
                else:
                    self._cursor = 0
            return s

    def all(self) -> list[Session]:
        with self.lock:
            return list(self._by_client.values())

    def count(self) -> int:
        return len(self._by_client)

    def ready_in_ring_order(self) -> list[Session]:
        """Sessions with a pending observation, starting after the last served one (the worker calls this every
        cycle: one pass over the ring, no per-session call)."""
        with self.lock:
            ring, c = self._ring, self._cursor
            after = [s for s in ring[c:] if s.mailbox._mail is not None]
            return after + [s for s in ring[:c] if s.mailbox._mail is not None]

    def served(self, session: Session) -> None:
        with self.lock:
            if session.client_uuid in self._by_client:
                self._cursor = (self._pos[session.client_uuid] + 1) % len(self._ring)


def reply_terms(req: SessionOpen, rtc_active: bool) -> tuple[str, float, bool]:
    """The reply a robot gets: (dtype, max float16 error, model space included).

    float16 only when the robot asked for it with a positive error bound (each chunk is still checked
    against that bound and goes as float32 when it does not fit); model space is left out only for a
    robot that accepts it and a session without RTC (its merge never reads model space).
    """
    f16 = req.reply_dtype == "float16" and req.reply_max_error > 0 and math.isfinite(req.reply_max_error)
    return (
        ("float16" if f16 else "float32"),
        (float(req.reply_max_error) if f16 else 0.0),
        not (req.reply_robot_only and not rtc_active),
    )
