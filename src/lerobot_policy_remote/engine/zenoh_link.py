"""`RemoteLink` over Zenoh: every declaration and every byte the robot sends or receives.

Callbacks only deposit into bounded deques and call `notify`; queries are answered by the worker
inside `with query:` (the reset query is held until then).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import zenoh

from ..discovery import ServiceInfo, certificate_scopes, list_services
from ..router_probe import probe_router
from ..shared_memory import reaches_over_shm
from ..wire.codec import decode, encode
from ..wire.errors import WireError
from ..wire.header import Header
from ..wire.keys import ServiceKeys, parse_key
from ..wire.messages import ResetAck, ResetRequest, RobotTelemetry, ServerStatus, SessionOpen
from ..zenoh_config import ROBOT_FLAGS, ZenohSettings, open_session
from .handshake import OpenedSession
from .handshake import open_session as open_remote_session
from .resend import is_large
from .transport import Inbound, MoveQuery, ResetQuery, ServerChange, TelemetryQuery
from .zenoh_queries import ZenohMoveQuery, ZenohResetQuery, ZenohTelemetryQuery

logger = logging.getLogger(__name__)


# Telemetry queries held for the worker: a reader asks once when it connects, so a few are plenty (a full ring drops
# the oldest, whose asker then sees no reply from this robot, never a stalled link).
TELEMETRY_QUERIES = 4

# What a robot dials when a replica offers a direct link: loopback only (server/direct.py); anything else in an
# ack is ignored, so a server cannot make a robot dial elsewhere.
_LOOPBACK = re.compile(r"tcp/127\.0\.0\.1:\d{1,5}")
MAX_DIRECT_ENDPOINTS = 4


def direct_endpoints(offered: Any) -> list[str]:
    """The loopback endpoints of an ack's `direct_endpoints` (others dropped)."""
    if not isinstance(offered, list):
        return []
    return [e for e in offered[:MAX_DIRECT_ENDPOINTS] if isinstance(e, str) and _LOOPBACK.fullmatch(e)]


def _scope_keys(cert_path: str | None) -> list[ServiceKeys]:
    """The key builders of the namespaces a certificate may use (none without one, or when it does not say)."""
    out = []
    for scope in certificate_scopes(cert_path)[0] if cert_path else ():
        try:
            out.append(scope.keys())
        except WireError as exc:  # a namespace no program could use: nothing to ask there
            logger.debug("certificate namespace %s: %s", scope, exc)
    return out


class ZenohLink:
    """The real transport: one client session through the configured router(s), and for a replica on this host a
    second one straight to it (observations out, chunks in; server/direct.py says why)."""

    def __init__(
        self, settings: ZenohSettings, keys: ServiceKeys, client_uuid: str, session: Any = None, direct: bool = True
    ) -> None:
        """`session`: an already open Zenoh session to declare on (the fleet simulator multiplexes many robots on
        one); this link then never closes it. Each robot keeps its own token, keys, publishers and inbox.
        `direct`: dial a replica on this host straight when it offers it (never with TLS or a shared session)."""
        self.settings = settings
        self._shared = session
        self.keys = keys
        self.client_uuid = client_uuid
        self._session: Any = None
        self._notify: Callable[[], None] = lambda: None
        self._objs: list[Any] = []
        self._replica_objs: list[Any] = []
        self._publisher: Any = None
        self._publisher_block: Any = None
        self._telemetry_pub: Any = None
        self._telemetry_queries: Any = None
        self._replica = ""
        self._known: list[ServerStatus] = []  # the last discovery's replicas (a drain re-handshake tries them first)
        self._inbox: collections.deque[Inbound] = collections.deque(maxlen=16)
        self._queries: collections.deque[ZenohResetQuery] = collections.deque(maxlen=4)
        self._moves: collections.deque[ZenohMoveQuery] = collections.deque(maxlen=4)
        self._changes: collections.deque[ServerChange] = collections.deque(maxlen=64)
        self._lost = threading.Event()
        self._scopes = _scope_keys(settings.tls_connect_certificate)
        self._direct_allowed = direct and session is None and not settings.uses_tls
        self._direct: Any = None  # the session straight to the bound replica, when it is on this host
        self._direct_offer: tuple[str, list[str]] = (
            "",
            [],
        )  # (replica, its loopback endpoints) from the last handshake
        # close() and bind() never interleave: a worker that outlived the engine's stop (blocked in a handshake past
        # its join timeout) could otherwise open the direct session after close(), and that session's callback
        # thread (not a daemon) would keep the process alive after the rollout ended
        self._state_lock = threading.Lock()
        self._closed = False

    # -- lifecycle
    def open(self, notify: Callable[[], None]) -> None:
        self._notify = notify
        self._closed = False
        if self._shared is not None:
            s = self._session = self._shared
        else:
            problem = probe_router(
                self.settings, ROBOT_FLAGS
            )  # a refused port or certificate: said now, not after the timeout
            if problem is not None:
                raise problem
            s = self._session = open_session(self.settings)
        with self._state_lock:
            self._declare(s)

    def _declare(self, s: zenoh.Session) -> None:
        """The robot's own declarations, all in its namespace (`retarget` moves them to another one)."""
        robot = self.keys.robot
        self._objs.append(s.liveliness().declare_token(robot(self.client_uuid, "alive")))
        self._objs.append(s.declare_subscriber(robot(self.client_uuid, "action"), self._on_action))
        self._objs.append(s.declare_queryable(robot(self.client_uuid, "episode_reset"), self._on_episode_reset))
        self._objs.append(s.declare_queryable(robot(self.client_uuid, "move"), self._on_move))
        self._telemetry_pub = s.declare_publisher(robot(self.client_uuid, "telemetry"))
        # The telemetry key also answers queries, which declares it on every router: a router reuses a publication's
        # route only on a key some session declared, and matches any other key against every declaration it holds,
        # per message (docs/decisions.md, "A robot's telemetry key is declared"). Zenoh deposits the queries in its
        # own ring: no Python thread or callback per robot.
        self._telemetry_queries = s.declare_queryable(
            robot(self.client_uuid, "telemetry"), zenoh.handlers.RingChannel(TELEMETRY_QUERIES)
        )
        self._objs += [self._telemetry_pub, self._telemetry_queries]
        # Every replica of the service, present (history) and future: failover reacts to a new token at once.
        self._objs.append(
            s.liveliness().declare_subscriber(self.keys.server("*", "alive"), self._on_server_token, history=True)
        )

    @property
    def direct(self) -> bool:
        """Observations and chunks take the direct link to the bound replica (not the router)."""
        return self._direct is not None

    @property
    def direct_allowed(self) -> bool:
        """This link may dial a replica on its host straight: asked for, its own session, no TLS (the router's
        access control must see every message). Public so the rule can be checked without a replica."""
        return self._direct_allowed

    @property
    def holds_session(self) -> bool:
        """A Zenoh session is held (its own or the shared one): False once closed. Public because a session left open
        keeps the process alive at exit (engine/hook.py), which the tests check."""
        return self._session is not None

    def close(self) -> None:
        """Idempotent; afterwards the link opens and binds nothing (LinkClosed), whoever still calls it."""
        with self._state_lock:
            self._closed = True
            for obj in self._replica_objs + self._objs:
                _undeclare(obj)
            self._replica_objs, self._objs = [], []
            self._close_direct()
            self._publisher = self._publisher_block = self._telemetry_pub = self._telemetry_queries = None
            if self._session is not None and self._session is not self._shared:
                try:
                    self._session.close()
                except Exception as exc:  # closing a session whose router is gone may raise; nothing to do
                    logger.debug("closing the zenoh session: %s", exc)
            self._session = None

    def retarget(self, keys: ServiceKeys) -> None:
        """A move to another namespace: every declaration on the old keys goes (chunks of the old session can no
        longer arrive), the same ones come on `keys`; the Zenoh session stays open. Unbound until `bind`."""
        with self._state_lock:
            if self._closed:
                raise LinkClosed("the link is closed: no retarget")
            for obj in self._replica_objs + self._objs:
                _undeclare(obj)
            self._replica_objs, self._objs = [], []
            self._close_direct()
            self._publisher = self._publisher_block = self._telemetry_pub = self._telemetry_queries = None
            self._replica, self._known = "", []
            self._lost.clear()
            self._changes.clear()  # the old namespace's replicas: the new token watch reports the new ones
            self.keys = keys
            self._declare(self._session)

    # -- session
    def handshake(
        self,
        request: SessionOpen,
        timeout_s: float,
        expect_fingerprint: str,
        avoid: str = "",
        keys: ServiceKeys | None = None,
    ) -> OpenedSession:
        if self._closed:
            raise LinkClosed("the link is closed: no handshake")
        home = keys is None or keys == self.keys  # another namespace (a move): no known replicas, none remembered
        known = [st for st in self._known if st.replica != avoid] if avoid and home else []
        opened = open_remote_session(
            self._session,
            self.keys if keys is None else keys,
            request,
            timeout_s=timeout_s,
            expect_fingerprint=expect_fingerprint,
            known=known,
            seen=self._known if home else None,
        )
        opened.same_host = reaches_over_shm(self._session, opened.ack.shm_zids)
        offered = direct_endpoints(opened.ack.direct_endpoints) if opened.same_host and self._direct_allowed else []
        self._direct_offer = (opened.ack.replica, offered)
        return opened

    def bind(self, replica: str) -> None:
        with self._state_lock:
            if self._closed:
                raise LinkClosed(f"the link is closed: not binding replica {replica}")
            self._bind(replica)

    def _bind(self, replica: str) -> None:
        for obj in self._replica_objs:
            _undeclare(obj)
        self._replica_objs = []
        self._close_direct()
        self._lost.clear()
        self._replica = replica  # the replica-wide token subscriber of `open` now reports this one's DELETE as lost
        s = self._open_direct(replica) or self._session
        if s is not self._session:  # the replica answers the way the observation came: listen there too
            self._replica_objs.append(
                s.declare_subscriber(self.keys.robot(self.client_uuid, "action"), self._on_action)
            )
        self._publisher = s.declare_publisher(
            self.keys.obs(replica, self.client_uuid),
            congestion_control=zenoh.CongestionControl.DROP,
            priority=zenoh.Priority.DATA,
            express=False,
        )
        self._publisher_block = None  # declared on the first large observation (most robots never send one)
        self._replica_objs.append(self._publisher)

    def publish_observation(self, body: bytes, header: Header) -> None:
        """Called by the engine's network worker only: a BLOCK put may wait for room in the tx queue."""
        pub = self._publisher
        if is_large(len(body)):  # never silently dropped (engine/resend.py): the same key, BLOCK
            if self._publisher_block is None:
                self._publisher_block = (self._direct or self._session).declare_publisher(
                    self.keys.obs(self._replica, self.client_uuid),
                    congestion_control=zenoh.CongestionControl.BLOCK,
                    priority=zenoh.Priority.DATA,
                    express=False,
                )
                self._replica_objs.append(self._publisher_block)
            pub = self._publisher_block
        pub.put(body, attachment=header.pack())

    def _open_direct(self, replica: str) -> Any:
        """A client session straight to `replica`'s loopback listener, if its last ack offered one; None otherwise
        (the router path). Its settings are the robot's own (lease, queues, shared memory) minus the router."""
        offer_replica, endpoints = self._direct_offer
        if offer_replica != replica or not endpoints:
            return None
        settings = dataclasses.replace(
            self.settings,
            mode="client",
            connect_endpoints=endpoints,
            listen_endpoints=[],
            connect_timeout_ms=min(self.settings.connect_timeout_ms, 500),
        )
        try:
            self._direct = open_session(settings)
        except Exception as exc:  # the router path works as before: say so once per bind, never fail the session
            logger.warning("Direct link to replica %s at %s failed (%s): using the router", replica, endpoints[0], exc)
            self._direct = None
        return self._direct

    def _close_direct(self) -> None:
        z, self._direct = self._direct, None
        if z is not None:
            try:
                z.close()
            except Exception as exc:  # the replica went first: nothing left to release
                logger.debug("closing the direct link: %s", exc)

    def server_reset(self, request: ResetRequest, timeout_s: float) -> ResetAck | None:
        for reply in self._session.get(
            self.keys.reset(self._replica, self.client_uuid), payload=encode(request), timeout=timeout_s
        ):
            if reply.ok is not None:
                return decode(ResetAck, reply.ok.payload.to_bytes())
        return None

    def services(self, timeout_s: float) -> list[ServiceInfo]:
        """Every service the router shows this robot; a certificate bound to some namespaces asks in each of them
        too (the router answers such a certificate nothing on the wildcard)."""
        return list_services(self._session, timeout_s, scopes=self._scopes) if self._session is not None else []

    def publish_telemetry(self, telemetry: RobotTelemetry) -> None:
        if self._telemetry_pub is None:
            return
        try:
            self._telemetry_pub.put(encode(telemetry))
        except Exception as exc:  # telemetry is best effort
            logger.debug("telemetry put failed: %s", exc)

    # -- collected by the worker
    def receive(self) -> list[Inbound]:
        return _drain(self._inbox)

    def reset_queries(self) -> list[ResetQuery]:
        return _drain(self._queries)

    def move_queries(self) -> list[MoveQuery]:
        return _drain(self._moves)

    def telemetry_queries(self) -> list[TelemetryQuery]:
        ring = self._telemetry_queries
        out: list[TelemetryQuery] = []  # not `list[T]()`: calling an alias tries to tag the list and catches the error
        if ring is None:
            return out
        try:
            while (query := ring.try_recv()) is not None:  # every worker pass: no key built unless a query waits
                out.append(ZenohTelemetryQuery(query, self.keys.robot(self.client_uuid, "telemetry")))
        except zenoh.ZError as exc:  # undeclared under us (the link is closing): nothing more to answer
            logger.debug("telemetry queries: %s", exc)
        return out

    def server_lost(self) -> bool:
        if self._lost.is_set():
            self._lost.clear()
            return True
        return False

    def server_changes(self) -> list[ServerChange]:
        return _drain(self._changes)

    # -- zenoh callbacks (deposit only)
    def _on_action(self, sample: Any) -> None:
        att = sample.attachment
        self._inbox.append(Inbound(sample.payload.to_bytes(), att.to_bytes() if att is not None else None))
        self._notify()

    def _on_episode_reset(self, query: Any) -> None:
        self._queries.append(ZenohResetQuery(query))
        self._notify()

    def _on_move(self, query: zenoh.Query) -> None:
        self._moves.append(ZenohMoveQuery(query))
        self._notify()

    def _on_server_token(self, sample: Any) -> None:
        """Every replica's token; the bound one's DELETE is the lost link. (A subscriber per bound replica cost each
        re-handshake a Python callback thread started and joined: 7 ms of CPU with 1,000 robots in one process.)"""
        try:
            replica = parse_key(str(sample.key_expr)).ident
        except WireError:
            return  # not one of ours: a token on a foreign key cannot name a replica
        alive = sample.kind == zenoh.SampleKind.PUT
        if not alive and replica == self._replica:
            self._lost.set()
        self._changes.append(ServerChange(replica, alive))
        self._notify()


class LinkClosed(RuntimeError):
    """The link was closed (the engine stopped): it opens, binds and hands out nothing any more."""


def _drain(dq: collections.deque[Any]) -> list[Any]:
    out = []
    while dq:
        out.append(dq.popleft())
    return out


def _undeclare(obj: Any) -> None:
    try:
        obj.undeclare()
    except Exception as exc:  # already gone with its session
        logger.debug("undeclare: %s", exc)
