"""Which `/metrics` URLs the console will fetch, and fetching them so that no server can stall or flood it.

A server's status carries `metrics_url`, written by the server itself (its manifest's `advertise_host`, or
`health_host`, and `health_port`). The console is the one fetching it, from the operator's machine, so a
status is not allowed to point it anywhere:

- the URL must be exactly `http(s)://HOST:PORT/metrics`: explicit port, no user info, no query, no fragment;
- the "advertised host" of a replica is the HOST of the first such URL it announced since its liveliness
  token appeared; a later status naming another host is refused until the replica's token goes away
  (a restarted pod may move), and a HOST:PORT already claimed by another replica is refused;
- one fetch reads at most `max_bytes` and ends by `deadline_s` (whole request: connect, headers, body);
- each replica is scraped on its own pool thread, never more than one fetch in flight per replica, so a
  trickling or huge answer costs that replica's row an error and never delays another replica's scrape.

What the pin cannot do: vouch for the first URL. A rogue server certificate can still name any host with
path /metrics; the fetch is a bounded GET whose answer is only parsed as Prometheus text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from .sources.prometheus import parse_metrics

MAX_METRICS_BYTES = 2 * 1024 * 1024  # our server's exposition is tens of KiB; anything past this is refused
DEADLINE_S = 2.0  # one whole fetch
SCRAPE_WORKERS = 16


def check_metrics_url(url: str) -> tuple[str, int, str]:
    """(host, port, "") for an acceptable URL, else ("", 0, why)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return "", 0, f"not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "", 0, "scheme must be http or https"
    if parts.username is not None or parts.password is not None:
        return "", 0, "user info not allowed"
    if not parts.hostname or port is None:
        return "", 0, "must name host and port"
    if parts.path != "/metrics" or parts.query or parts.fragment or url.endswith(("?", "#")):
        return "", 0, "path must be exactly /metrics (no query, no fragment)"
    return parts.hostname.lower(), port, ""


class MetricsTargets:
    """replica -> URL it may be scraped at, under the rules above. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._urls: dict[str, str] = {}
        self._pinned: dict[str, tuple[str, int]] = {}  # replica -> (host, port) of its first accepted URL

    def offer(self, replica: str, url: str) -> str:
        """Record `replica`'s announced URL; "" when accepted, else why it is refused (and no longer scraped)."""
        host, port, why = check_metrics_url(url)
        with self._lock:
            pin = self._pinned.get(replica)
            if not why and pin is not None and pin[0] != host:
                why = f"host {host} is not the advertised host {pin[0]}"
            if not why and any(r != replica and p == (host, port) for r, p in self._pinned.items()):
                why = f"{host}:{port} is another replica's"
            if why:
                self._urls.pop(replica, None)  # the pin stays: moving elsewhere needs the token to go first
                return f"metrics URL refused: {why}"
            self._pinned[replica] = (host, port)
            self._urls[replica] = url
        return ""

    def forget(self, replica: str) -> None:
        """The replica's token went away: the next one it announces is pinned afresh."""
        with self._lock:
            self._pinned.pop(replica, None)
            self._urls.pop(replica, None)

    def urls(self) -> dict[str, str]:
        with self._lock:
            return dict(self._urls)


def fetch_metrics(
    client: Any,
    url: str,
    max_bytes: int = MAX_METRICS_BYTES,
    deadline_s: float = DEADLINE_S,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[str, float] | None, str]:
    """One streamed GET: (values, "") or (None, reason). `client` is an httpx.Client; never raises."""
    import httpx

    end = clock() + deadline_s
    # each network wait is a fraction of the deadline, and the deadline is checked between reads: a trickle
    # ends within about deadline_s * 1.25
    step = httpx.Timeout(deadline_s / 4)
    try:
        with client.stream("GET", url, timeout=step, follow_redirects=False) as resp:
            if resp.status_code != 200:
                return None, f"{url}: HTTP {resp.status_code}"
            declared = resp.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                return None, f"{url}: answer too large ({declared} bytes > {max_bytes})"
            body = bytearray()
            for chunk in resp.iter_raw():
                body += chunk
                if len(body) > max_bytes:
                    return None, f"{url}: answer too large (> {max_bytes} bytes)"
                if clock() > end:
                    return None, f"{url}: too slow (no full answer in {deadline_s:.1f} s)"
        if clock() > end:
            return None, f"{url}: too slow (no full answer in {deadline_s:.1f} s)"
        return parse_metrics(body.decode("utf-8", "replace")), ""
    except Exception as exc:  # connection refused, timeout, bad text: all shown, never raised
        return None, f"{url}: {type(exc).__name__}: {exc}"


class Scraper:
    """Scrapes every accepted target each period, one pool task per replica, never two for one replica."""

    def __init__(
        self,
        targets: MetricsTargets,
        report: Callable[[str, dict[str, float] | None, str], None],
        workers: int = SCRAPE_WORKERS,
        deadline_s: float = DEADLINE_S,
        max_bytes: int = MAX_METRICS_BYTES,
    ) -> None:
        import httpx

        self.targets = targets
        self.report = report
        self.deadline_s = deadline_s
        self.max_bytes = max_bytes
        self._client = httpx.Client(limits=httpx.Limits(max_connections=workers * 2))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleet-scrape")
        self._busy: set[str] = set()
        self._lock = threading.Lock()

    def round(self) -> int:
        """Start one scrape per idle replica; returns how many were started (those still in flight are skipped)."""
        started = 0
        for replica, url in self.targets.urls().items():
            with self._lock:
                if replica in self._busy:
                    continue
                self._busy.add(replica)
            self._pool.submit(self._one, replica, url)
            started += 1
        return started

    def _one(self, replica: str, url: str) -> None:
        try:
            values, error = fetch_metrics(self._client, url, self.max_bytes, self.deadline_s)
            self.report(replica, values, error[:200])
        finally:
            with self._lock:
                self._busy.discard(replica)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
