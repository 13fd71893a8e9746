"""A loopback listener for the robots on this server's own host: their observations and chunks skip the router.

Through a router every request crosses two extra processes (robot -> router -> server and back); on one host
that hop was the largest part of the round trip the server does not spend in the model, and a third process
to wake on a small machine (docs/performance.md). A robot whose link reaches this replica over
shared memory (so: this host) and that uses no TLS dials the endpoint named in the session ack and sends its
observations there; the server answers the way each observation came. Liveliness, status, handshakes,
telemetry, audit lines and resets stay on the router, so the fleet sees exactly what it saw before.

Never with TLS: a fleet with certificates has the router's access control, which must see every message.
Without TLS the router checks nothing, so a loopback link skips nothing but the hop. The listener binds
127.0.0.1 only, is a peer that neither dials nor gossips (an island: nothing it hears is routed elsewhere).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..loopback_ports import free_loopback_port
from ..zenoh_config import ZenohConfigError, ZenohSettings, open_session

log = logging.getLogger("lerobot.policy_server")

_TRIES = 3  # a port picked free can be taken before zenoh binds it: pick another


def eligible(settings: ZenohSettings) -> bool:
    """Whether a server with these (main session) settings may offer a direct link: never under TLS."""
    return not settings.uses_tls and settings.mode != "router"


class DirectListener:
    """A zenoh peer session on `tcp/127.0.0.1:<port>` carrying this replica's observations in and chunks out."""

    def __init__(self, main: ZenohSettings, obs_key: str, on_obs: Callable[[Any], None]) -> None:
        self._main, self._obs_key, self._on_obs = main, obs_key, on_obs
        self.z: Any = None
        self.endpoint = ""
        self._sub: Any = None

    def start(self) -> DirectListener:
        last: Exception | None = None
        for _ in range(_TRIES):
            endpoint = f"tcp/127.0.0.1:{free_loopback_port()}"
            settings = ZenohSettings(
                mode="peer",
                listen_endpoints=[endpoint],
                gossip=False,
                lease_ms=self._main.lease_ms,
                keep_alive=self._main.keep_alive,
                shared_memory=self._main.shared_memory,
                tx_queue_interactive_high=self._main.tx_queue_interactive_high,
                max_message_bytes=self._main.max_message_bytes,
            )
            try:
                self.z = open_session(settings)
            except ZenohConfigError as exc:  # the port went to someone else between the pick and the bind
                last = exc
                continue
            self.endpoint = endpoint
            self._sub = self.z.declare_subscriber(self._obs_key, self._on_obs)
            return self
        raise ZenohConfigError(f"no loopback port for the direct listener after {_TRIES} tries: {last}")

    @property
    def endpoints(self) -> list[str]:
        return [self.endpoint] if self.endpoint else []

    def close(self) -> None:
        z, self.z, self.endpoint = self.z, None, ""
        if z is None:
            return
        try:
            z.close()
        except Exception as exc:  # closing a session zenoh already tore down: nothing left to release
            log.debug("direct listener close failed: %s", exc)
