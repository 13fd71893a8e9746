"""The one place that turns our settings into a `zenoh.Config`.

Field names follow the server manifest's `zenoh:` section in the user guide; the robot's
`--inference.*` flags and the console's flags are mapped onto the same dataclass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("client", "peer", "router")


class ZenohConfigError(ValueError):
    """A setting that cannot become a working Zenoh config; the message says what to fix."""


@dataclass
class ZenohSettings:
    mode: str = "client"
    connect_endpoints: list[str] = field(default_factory=list)
    listen_endpoints: list[str] = field(default_factory=list)
    # TLS: a root CA alone gives server-authenticated TLS; adding a cert + key enables mTLS.
    tls_root_ca_certificate: str | None = None
    tls_connect_certificate: str | None = None
    tls_connect_private_key: str | None = None
    tls_listen_certificate: str | None = None
    tls_listen_private_key: str | None = None
    tls_enable_mtls: bool | None = None  # None: on when a connect cert is given (client) or a CA is given (router)
    # Liveness: the lease a session advertises decides how fast others notice it hung (ms).
    lease_ms: int = 1000
    keep_alive: int = 4
    # Connecting: how long open() waits for a router (-1 forever), and the reconnect backoff.
    connect_timeout_ms: int = 5000
    retry_period_init_ms: int = 100
    retry_period_max_ms: int = 1000
    shared_memory: bool = True
    adminspace: bool = False
    # TX queue (in batches) of the INTERACTIVE_HIGH priority that chunks and events use; 0 keeps zenoh's default (2).
    # A batching server sends one chunk per robot back to back: a deeper queue keeps the burst from being dropped.
    tx_queue_interactive_high: int = 0
    extra_json5: str | None = None  # a JSON5 file path or inline JSON5 text, merged key by key last

    def validate(self) -> None:
        if not 0 <= self.tx_queue_interactive_high <= 16:
            raise ZenohConfigError(f"tx_queue_interactive_high must be 0 (zenoh default) to 16, got {self.tx_queue_interactive_high}")
        if self.mode not in MODES:
            raise ZenohConfigError(f"zenoh mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.mode == "client" and not self.connect_endpoints:
            raise ZenohConfigError("zenoh client mode needs at least one connect endpoint, e.g. tcp/127.0.0.1:7447")
        if self.mode == "router" and not self.listen_endpoints:
            raise ZenohConfigError("a zenoh router needs at least one listen endpoint, e.g. tcp/127.0.0.1:7447")
        pairs = (
            ("tls_connect_certificate", "tls_connect_private_key"),
            ("tls_listen_certificate", "tls_listen_private_key"),
        )
        for a, b in pairs:
            if bool(getattr(self, a)) != bool(getattr(self, b)):
                raise ZenohConfigError(f"{a} and {b} must be given together")
        for name in (
            "tls_root_ca_certificate",
            "tls_connect_certificate",
            "tls_connect_private_key",
            "tls_listen_certificate",
            "tls_listen_private_key",
        ):
            path = getattr(self, name)
            if path and not Path(path).is_file():
                raise ZenohConfigError(f"{name}: file {path!r} does not exist")
        uses_tls = any(e.startswith("tls/") for e in self.connect_endpoints + self.listen_endpoints)
        if any(e.startswith("tls/") for e in self.connect_endpoints) and not self.tls_root_ca_certificate:
            raise ZenohConfigError("a tls/ connect endpoint needs tls_root_ca_certificate (the CA that signed the router)")
        if any(e.startswith("tls/") for e in self.listen_endpoints) and not self.tls_listen_certificate:
            raise ZenohConfigError("a tls/ listen endpoint needs tls_listen_certificate and tls_listen_private_key")
        if self.tls_connect_certificate and not uses_tls:
            raise ZenohConfigError("a client certificate was given but no endpoint uses tls/: use tls/host:port")

    def to_dict(self) -> dict[str, Any]:
        """The JSON5 object handed to zenoh (before the extra config is merged)."""
        self.validate()
        conf: dict[str, Any] = {
            "mode": self.mode,
            "scouting": {"multicast": {"enabled": False}, "gossip": {"enabled": self.mode != "client"}},
            "transport": {
                "link": {"tx": {"lease": self.lease_ms, "keep_alive": self.keep_alive}},
                "shared_memory": {"enabled": self.shared_memory},
            },
        }
        if self.tx_queue_interactive_high:
            conf["transport"]["link"]["tx"]["queue"] = {"size": {"interactive_high": self.tx_queue_interactive_high}}
        if self.connect_endpoints:
            conf["connect"] = {
                "endpoints": list(self.connect_endpoints),
                "timeout_ms": self.connect_timeout_ms,
                "retry": {
                    "period_init_ms": self.retry_period_init_ms,
                    "period_max_ms": self.retry_period_max_ms,
                    "period_increase_factor": 2,
                },
            }
        if self.listen_endpoints:
            conf["listen"] = {"endpoints": list(self.listen_endpoints)}
        if self.mode == "router":
            conf["scouting"]["delay"] = 0
        if self.adminspace:
            conf["adminspace"] = {"enabled": True, "permissions": {"read": True, "write": False}}
        tls = self._tls()
        if tls:
            conf["transport"]["link"]["tls"] = tls
        return _merge(conf, load_json5(self.extra_json5)) if self.extra_json5 else conf

    def _tls(self) -> dict[str, Any]:
        tls: dict[str, Any] = {}
        if self.tls_root_ca_certificate:
            tls["root_ca_certificate"] = self.tls_root_ca_certificate
        if self.tls_connect_certificate:
            tls["connect_certificate"] = self.tls_connect_certificate
            tls["connect_private_key"] = self.tls_connect_private_key
        if self.tls_listen_certificate:
            tls["listen_certificate"] = self.tls_listen_certificate
            tls["listen_private_key"] = self.tls_listen_private_key
        mtls = self.tls_enable_mtls
        if mtls is None:
            mtls = bool(self.tls_connect_certificate) or (bool(self.tls_listen_certificate) and bool(self.tls_root_ca_certificate))
        if tls and mtls:
            tls["enable_mtls"] = True
        return tls

    def build(self) -> Any:
        """-> zenoh.Config (imports zenoh lazily so settings stay importable anywhere)."""
        import zenoh

        try:
            return zenoh.Config.from_json5(json.dumps(self.to_dict()))
        except Exception as exc:  # zenoh raises ZError with the offending key
            raise ZenohConfigError(f"zenoh rejected the configuration: {exc}") from exc


def open_session(settings: ZenohSettings) -> Any:
    """Open a zenoh session, turning zenoh's terse failure into an actionable message."""
    import zenoh

    config = settings.build()
    try:
        return zenoh.open(config)
    except Exception as exc:
        where = ", ".join(settings.connect_endpoints or settings.listen_endpoints) or "(no endpoint)"
        raise ZenohConfigError(
            f"could not open a zenoh {settings.mode} session via {where}: {exc}. "
            "Check that the router is running and reachable (e.g. `lerobot-fleet router --listen tcp/127.0.0.1:7447`), "
            "and for tls/ endpoints that the CA and certificates match (set RUST_LOG=warn for zenoh's reason)."
        ) from exc


def load_json5(source: str) -> dict[str, Any]:
    """A path to a JSON5 file, or inline JSON5 text -> dict."""
    import json5

    text = Path(source).read_text() if not source.lstrip().startswith("{") else source
    try:
        obj = json5.loads(text)
    except ValueError as exc:
        raise ZenohConfigError(f"extra zenoh config is not valid JSON5: {exc}") from exc
    if not isinstance(obj, dict):
        raise ZenohConfigError("extra zenoh config must be a JSON5 object")
    return obj


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep merge, key by key: maps merge recursively, anything else in `extra` replaces."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
