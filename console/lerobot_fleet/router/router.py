"""An embedded Zenoh router: the Python library in router mode (no zenohd binary is needed)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zenoh

from lerobot_policy_remote.zenoh_config import (
    OBS_TX_QUEUE_BATCHES,
    ROUTER_MAX_MESSAGE_BYTES,
    ZenohConfigError,
    ZenohSettings,
    load_json5,
    open_session,
)


def acl_or_none(inventory: str | None) -> dict[str, Any] | None:
    """`--inventory FLEET.yaml` -> the `{"access_control": ...}` block (None without an inventory)."""
    if not inventory:
        return None
    from .acl import router_acl_config
    from .inventory import load_inventory

    return router_acl_config(load_inventory(inventory))


def router_settings(
    listen: list[str],
    config: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_ca: str | None = None,
    connect: list[str] | None = None,
    acl: dict[str, Any] | None = None,
) -> ZenohSettings:
    """Router settings: admin space readable (the console lists sessions), multicast off, optional mesh + ACL."""
    if acl is not None and not (tls_ca and tls_cert):
        raise ZenohConfigError(
            "--inventory matches clients by certificate common name, so it needs mTLS: "
            "give --tls-cert, --tls-key and --tls-ca (make them with `lerobot-fleet pki`)"
        )
    extra = config
    if acl is not None:
        # the user's --config may add to the generated ACL's siblings, never silently replace it
        merged = dict(load_json5(config)) if config else {}
        if "access_control" in merged:
            raise ZenohConfigError("--config has its own access_control and --inventory generates one: use one of them")
        merged.update(acl)
        extra = json.dumps(merged)
    return ZenohSettings(
        mode="router",
        listen_endpoints=listen,
        connect_endpoints=list(connect or []),
        connect_timeout_ms=-1,  # a mesh neighbour that is down is retried forever, in the background
        adminspace=True,
        tls_listen_certificate=tls_cert,
        tls_listen_private_key=tls_key,
        tls_root_ca_certificate=tls_ca,
        # mesh links dial out with the router's own certificate (its CN is in the inventory as a router)
        tls_connect_certificate=tls_cert if connect and tls_cert else None,
        tls_connect_private_key=tls_key if connect and tls_cert else None,
        max_message_bytes=ROUTER_MAX_MESSAGE_BYTES,
        tx_queue_data=OBS_TX_QUEUE_BATCHES,  # observations pass here on their way to a server (zenoh_config.py)
        extra_json5=extra,
    )


class RefusedBoard:
    """The ACL log filter's latest board of refused servers (refused_board.RefusedServers), read from its pipe on a
    thread and answered on `REFUSED_KEY/<zid>`: a console cannot see a server whose keys the router drops, only the
    router can tell it. Ages grow between two boards and entries past `REFUSED_TTL_S` leave."""

    def __init__(self, fd: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._fd = fd
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []
        self._at = clock()

    def start(self) -> RefusedBoard:
        threading.Thread(target=self._read, name="acl-board", daemon=True).start()
        return self

    def _read(self) -> None:
        from .refused_board import parse_board

        with os.fdopen(self._fd, "rb") as pipe:  # EOF when the filter exits
            for raw in pipe:
                self.take(parse_board(raw))

    def take(self, entries: list[dict[str, Any]]) -> None:
        with self._lock:
            self._entries, self._at = entries, self._clock()

    def payload(self) -> bytes:
        """The board now: ages as of this instant, expired entries left out."""
        from .refused_board import REFUSED_TTL_S, board_line

        with self._lock:
            since = self._clock() - self._at
            entries = [
                {**e, "age_s": round(e["age_s"] + since, 1), "for_s": round(e["for_s"] + since, 1)}
                for e in self._entries
                if e["age_s"] + since <= REFUSED_TTL_S
            ]
        return board_line(entries).encode()

    def answer(self, key: str) -> Callable[[Any], None]:
        """The queryable's callback: replies with the board, which is already in memory."""

        def on_query(query: Any) -> None:
            with query:
                query.reply(key, self.payload())

        return on_query


def _log_refusals(board_fd: int | None = None) -> Callable[[], None]:
    """Print one line per refused message (rate-limited) on stdout; RUST_LOG, when set, wins. `board_fd`: where the
    filter sends its board of refused servers."""
    import zenoh

    from .acl_log import TRACE_FILTER, install

    finish = install(board_fd=board_fd)
    try:
        zenoh.init_log_from_env_or(f"warn,{TRACE_FILTER}")
    except Exception as exc:  # logging already initialised in this process: keep going without it
        print(f"note: zenoh logging not initialised, refusals will not be logged ({exc})", flush=True)
    return finish


INSECURE_REPEAT_S = 60.0
_LOOPBACK_HOSTS = ("localhost", "::1")


def exposed_endpoints(listen: list[str]) -> list[str]:
    """The listen endpoints reachable from another machine (anything but 127.0.0.0/8, ::1 and localhost)."""
    out = []
    for endpoint in listen:
        locator = endpoint.split("#", 1)[0]
        _, _, where = locator.partition("/")
        host = where.rsplit(":", 1)[0] if ":" in where else where
        host = host.strip("[]").lower()
        if not (host.startswith("127.") or host in _LOOPBACK_HOSTS):
            out.append(endpoint)
    return out


def check_exposure(listen: list[str], inventory: str | None, insecure: bool) -> str | None:
    """A router others can reach enforces the inventory's access control; without it, refuse unless --insecure.

    Returns the warning to repeat while it runs open (None when it is not open to the network)."""
    exposed = exposed_endpoints(listen)
    if inventory or not exposed:
        return None
    what = (
        f"listening on {', '.join(exposed)} without --inventory: no access control, any client that reaches it "
        "may act as any robot or policy server"
    )
    if not insecure:
        raise ZenohConfigError(
            f"refusing to start: {what}. Give --inventory FLEET.yaml with --tls-cert/--tls-key/--tls-ca "
            "(docs/security.md), listen on tcp/127.0.0.1 only, or add --insecure for a trusted lab network"
        )
    return f"WARNING: insecure router: {what} (--insecure)"


def run_router(
    settings: ZenohSettings,
    stop: threading.Event | None = None,
    inventory: str | None = None,
    insecure_warning: str | None = None,
    serve: Callable[[zenoh.Session], Callable[[], None]] | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT (or `stop` is set); prints one ready line for supervisors and tests.
    `insecure_warning` is printed at start and every minute while it runs. `serve`: started on the router's session
    before the ready line (the fleet's rollout); returns what stops it."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    board: RefusedBoard | None = None
    finish = None
    if inventory:
        read_end, write_end = os.pipe()
        finish = _log_refusals(write_end)
        os.close(write_end)  # the filter holds it now: the reader sees EOF when the filter exits
        board = RefusedBoard(read_end).start()
    session = open_session(settings)
    if board is not None:
        from .refused_board import REFUSED_KEY

        own = f"{REFUSED_KEY}/{session.zid()}"
        queryable = session.declare_queryable(own, board.answer(own))  # noqa: F841 (held: declared while it runs)
    stop_serving = serve(session) if serve is not None else None
    mesh = f"; meshing with {', '.join(settings.connect_endpoints)}" if settings.connect_endpoints else ""
    acl = f"; access control from {inventory} (default deny)" if inventory else ""
    if insecure_warning:
        _say(insecure_warning)
    _say(f"Zenoh router up: listening on {', '.join(settings.listen_endpoints)} (zid {session.zid()}){mesh}{acl}")
    try:
        while not stop.wait(INSECURE_REPEAT_S if insecure_warning else None):
            _say(insecure_warning or "")
    finally:
        if stop_serving is not None:
            stop_serving()
        session.close()
    _say("Zenoh router stopped")
    if finish is not None:
        finish()
    return 0


def _say(line: str) -> None:
    """Print a line; a reader that went away (a closed pipe, a log filter killed with the process group) is
    not an error of the router's: later output goes nowhere instead of "[Errno 32] Broken pipe"."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
