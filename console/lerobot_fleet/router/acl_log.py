"""The router's refusal log: zenoh's access-control trace, reduced to one line per refused (who, what, key).

Zenoh 1.10 reports each ACL decision only at TRACE level, allowed and refused alike, on stdout. The router
points its stdout at a filter process that keeps every other line as is, drops the "is authorized" lines, and
prints refusals as `ACL refused: CN=arm-a put (ingress) on <key>`, at most once per key every `window_s`
seconds with a count, so a client hammering a denied key cannot flood the log.

Hostile clients choose the keys: the filter's memory is bounded (at most `MAX_KEYS` remembered keys and
`MAX_NAMES` certificate names, oldest forgotten first), its refusal lines share one global rate
(`MAX_LINES_PER_S`, the excess summed up in one line), and a full output never blocks it, so the router
that writes into its pipe never waits on a slow reader (lines that do not fit are counted and reported).

The filter also keeps a board of refused servers (`refused_board.py`) and hands it to the router process on a
second pipe.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from lerobot_policy_remote.wire.text import printable

from .refused_board import BOARD_EVERY_S, MAX_LINE_BYTES, RefusedServers, board_line

K = TypeVar("K")
V = TypeVar("V")

MAX_KEYS = 4096  # (who, what, flow, key) tuples remembered for the per-key window
MAX_NAMES = 4096  # zid -> CN, address -> CN, unknown zids
MAX_LINES_PER_S = 20.0  # refusal lines, all keys together
BURST_LINES = 100

TRACE_FILTER = (
    "zenoh::net::routing::interceptor::access_control=trace,zenoh_link_tls::unicast=debug,"
    "zenoh_transport::unicast::establishment::accept=debug"
)  # the last two: which zid has which certificate
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DECISION = re.compile(
    r"access_control: (?P<cached>Using cached result: )?(?P<zid>[0-9a-f]+)(?: on (?P<subject>\S+))? "
    r"is (?P<verdict>un)?authorized to (?P<what>[A-Za-z/ ]+?) \((?P<flow>ingress|egress)\) on (?P<key>\S+)"
)
_CN = re.compile(r"CertCommonName\(([^)]*)\)")
_TLS_ACCEPTED = re.compile(r"Accepted TLS connection on \S+: (?P<addr>\S+)\. Common Name: (?P<cn>.+)\.$")
_LINK_ACCEPTED = re.compile(r"New transport link accepted from (?P<zid>[0-9a-f]+) to .*?dst: tls/(?P<addr>[^,\s]+)")
_NO_SUBJECT = re.compile(r"access_control: (?P<zid>[0-9a-f]+) did not match any configured ACL subject")
_CACHING = re.compile(r"ACL \((?P<flow>ingress|egress)\): caching permissions for `(?P<key>[^`]+)`")


class RefusalLog:
    """Pure line filter (testable): feed zenoh log lines, get the lines to print."""

    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._last: OrderedDict[tuple[str, str, str, str], tuple[float, int]] = OrderedDict()
        self._tokens = float(BURST_LINES)
        self._refill_at = clock()
        self.rate_dropped = 0  # refusal lines over the global rate, told in the next line that goes out
        # (flow, key, zid of the client) zenoh is pre-computing decisions for; the zid is learnt from the first line
        self._caching: tuple[str, str, str | None] | None = None
        # zid -> certificate CN, learnt from every decision line that names both: zenoh's cached verdicts name only
        # the zid
        self.names: OrderedDict[str, str] = OrderedDict()
        self._by_addr: OrderedDict[str, str] = OrderedDict()  # peer address -> CN, from the TLS accept line
        self._unknown: OrderedDict[str, None] = OrderedDict()  # zids that matched no inventory subject
        self.servers = RefusedServers(clock)  # every refused announcement counts, printed or not

    @property
    def keys_remembered(self) -> int:
        """How many (who, what, flow, key) the repeat filter holds: at most MAX_KEYS whatever keys clients invent.
        Public so that bound can be checked from outside."""
        return len(self._last)

    @staticmethod
    def _remember(table: OrderedDict[K, V], key: K, value: V, cap: int = MAX_NAMES) -> None:
        """Insert as newest; forget the oldest beyond `cap` (a client inventing names cannot grow us)."""
        table[key] = value
        table.move_to_end(key)
        while len(table) > cap:
            table.popitem(last=False)

    def _rate_ok(self) -> bool:
        """One global token bucket for refusal lines, whatever key they name."""
        now = self.clock()
        self._tokens = min(float(BURST_LINES), self._tokens + (now - self._refill_at) * MAX_LINES_PER_S)
        self._refill_at = now
        if self._tokens < 1.0:
            self.rate_dropped += 1
            return False
        self._tokens -= 1.0
        return True

    @property
    def idle(self) -> bool:
        """Not inside a permission-caching block."""
        return self._caching is None

    def knows(self, raw: bytes) -> bool:
        """Cheap (no regex): True unless `raw` names a certificate for a zid not learnt yet."""
        if b"CertCommonName(" not in raw:
            return True
        on = raw.find(b" on ")  # "...access_control: <zid> on Interface(lo)+CertCommonName(arm-01)+..."
        if on < 0:
            return True
        return raw[raw.rfind(b" ", 0, on) + 1 : on].decode("ascii", "replace") in self.names

    def _identity(self, plain: str) -> str | None:
        """The lines that tie a zid to its certificate: remembered, never printed (None: not one of them)."""
        if (t := _TLS_ACCEPTED.search(plain)) is not None:
            self._remember(self._by_addr, t["addr"], t["cn"])
            return ""
        if (n := _NO_SUBJECT.search(plain)) is not None:
            self._remember(self._unknown, n["zid"], None)
            return ""
        if (a := _LINK_ACCEPTED.search(plain)) is not None:
            cn = self._by_addr.pop(a["addr"], None)
            if cn is None:
                return ""
            self._remember(self.names, a["zid"], cn)
            if a["zid"] in self._unknown:
                del self._unknown[a["zid"]]
                return (
                    f"ACL refused: CN={cn} is in no role of the inventory: every message it sends is refused (issue it "
                    "with `lerobot-fleet pki issue DIR NAME --role ROLE`, or give the client a certificate that is)"
                )
            return ""
        return None

    def feed(self, line: str) -> str | None:
        plain = _ANSI.sub("", line.rstrip("\n"))
        told = (
            self._identity(plain)
            if ("Common Name" in plain or "accepted from" in plain or "did not match" in plain)
            else None
        )
        if told is not None:
            return told or None
        c = _CACHING.search(plain)
        if c is not None:
            # zenoh evaluates every message kind for a newly declared key and logs each verdict:
            # those lines are bookkeeping, not messages a client sent
            self._caching = (c["flow"], c["key"], None)
            return None
        m = _DECISION.search(plain)
        if m is None:
            self._caching = None
            if "access_control" in plain and "TRACE" in plain or " DEBUG " in plain and "zenoh" in plain:
                return None  # zenoh's own bookkeeping (and the debug lines read above): not for the operator
            return line.rstrip("\n")
        cn = _CN.search(m["subject"] or "")
        if cn is not None:
            self._remember(self.names, m["zid"], cn.group(1))
        if (
            not m["cached"]
            and self._caching is not None
            and self._caching[:2] == (m["flow"], m["key"])
            and self._caching[2] in (None, m["zid"])
        ):
            self._caching = (m["flow"], m["key"], m["zid"])
            return None
        self._caching = None
        if not m["verdict"]:
            return None  # allowed: the normal path, not worth a line
        name = self.names.get(m["zid"])
        who = f"CN={name}" if name is not None else f"zid={m['zid']} (certificate not seen yet)"
        what = (
            m["what"].split("/")[-1].strip().lower().replace(" ", "_")
        )  # "Declare Liveliness Subscriber" -> declare_liveliness_subscriber
        if name is not None:
            self.servers.observe(name, what, m["flow"], m["key"])
        key = (who, what, m["flow"], m["key"])
        now = self.clock()
        last, suppressed = self._last.get(key, (-1e18, 0))
        if now - last < self.window_s:
            self._last[key] = (last, suppressed + 1)
            return None
        if not self._rate_ok():
            if key in self._last:  # counted for its next line; a new key over the rate is only counted globally
                self._last[key] = (last, suppressed + 1)
            return None
        self._remember(self._last, key, (now, 0), MAX_KEYS)
        more = f" (and {suppressed} more time(s) in the last {self.window_s:.0f} s)" if suppressed else ""
        line = f"ACL refused: {who} {what} ({m['flow']}) on {m['key']}{more}"
        if self.rate_dropped:
            line += f" [{self.rate_dropped} other refusal line(s) not printed: over {MAX_LINES_PER_S:.0f} lines/s]"
            self.rate_dropped = 0
        return line


def install(window_s: float = 10.0, board_fd: int | None = None) -> Callable[[], None]:
    """Point fd 1 (where zenoh logs) at a filter process; call before zenoh's logging is initialised.
    `board_fd`: the write end of a pipe the filter sends its board of refused servers on (`RefusedServers`).

    A separate process, not a thread: zenoh's threads block when the pipe is full, and a thread of ours
    would need the GIL to drain it while the main thread may hold it inside zenoh (a deadlock we saw at
    shutdown). The filter ends at EOF, so it also ends when the router is killed. Returns `finish()`,
    which hands fd 1 back and waits for the filter to print what is left (call it last).
    """
    sys.stdout.flush()
    original = os.dup(1)
    argv = [sys.executable, "-m", "lerobot_fleet.router.acl_log", str(window_s)]
    argv += [str(board_fd)] if board_fd is not None else []
    filt = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=original,
        close_fds=True,
        pass_fds=(board_fd,) if board_fd is not None else (),
    )
    assert filt.stdin is not None
    os.dup2(filt.stdin.fileno(), 1)
    filt.stdin.close()  # fd 1 is now the only writer
    sys.stdout = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")

    def finish() -> None:
        piped, sys.stdout = sys.stdout, sys.__stdout__
        try:
            piped.close()
        except OSError:  # the filter is gone (killed with the router's process group): nothing left to print
            pass
        os.dup2(original, 1)  # closes the pipe's last writer: the filter prints what is left, sees EOF, exits
        try:
            filt.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            filt.kill()

    return finish


def _main(argv: list[str]) -> int:
    """The filter process: stdin -> RefusalLog -> stdout, until EOF.

    It ignores SIGINT and SIGTERM: a Ctrl-C or a supervisor's SIGTERM reaches the router's whole process
    group, and the router still prints its last lines through this filter while it stops (a filter that
    died first gave "[Errno 32] Broken pipe"). It ends at EOF, also when the router is killed."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    filt = RefusalLog(float(argv[0]) if argv else 10.0)
    out = LineWriter(sys.stdout.fileno())
    board = LineWriter(int(argv[1]), notices=False) if len(argv) > 1 else None
    board_at = 0.0
    for raw in sys.stdin.buffer:
        # fast path: most lines are "is authorized" verdicts, dropped without decoding or regex (outside a
        # permission-caching block, where dropping one changes nothing the filter remembers)
        if filt.idle and b" is authorized to " in raw and b"access_control" in raw and filt.knows(raw):
            continue
        line = filt.feed(raw.decode("utf-8", "replace"))
        if line is not None:
            out.write(printable(_ANSI.sub("", line), 2000))  # keys and names in it are the client's
        if board is not None and filt.servers.changed and time.monotonic() - board_at >= BOARD_EVERY_S:
            # a board that does not fit the pipe now is dropped whole; the next refusal sends a fresh one
            filt.servers.changed = not board.write(board_line(filt.servers.board()))
            board_at = time.monotonic()
    return 0


class LineWriter:
    """Writes whole lines to a fd without ever blocking: a line that does not fit now is dropped and counted
    (the count goes out with the next line that fits), so the filter keeps draining the router's pipe."""

    def __init__(self, fd: int, notices: bool = True) -> None:
        """`notices`: prefix the next line that fits with the count of dropped ones (not for machine-read lines)."""
        self.fd = fd
        self.notices = notices
        self.dropped = 0

    def write(self, line: str) -> bool:
        data = line.encode("utf-8", "replace")[:MAX_LINE_BYTES]
        if self.dropped and self.notices:
            data = f"[acl log: {self.dropped} line(s) dropped, output full]\n".encode() + data[: MAX_LINE_BYTES - 80]
        try:
            _, writable, _ = select.select([], [self.fd], [], 0)
            if not writable:
                raise BlockingIOError
            written = os.write(self.fd, data + b"\n")
        except (BlockingIOError, InterruptedError):
            self.dropped += 1
            return False
        except OSError:  # the reader is gone: nothing more to tell anyone
            self.dropped += 1
            return False
        if written == len(data) + 1:
            self.dropped = 0
        return True


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
