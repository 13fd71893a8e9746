"""An embedded Zenoh router: the Python library in router mode (no zenohd binary is needed)."""

from __future__ import annotations

import signal
import threading

from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session


def router_settings(
    listen: list[str],
    config: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_ca: str | None = None,
) -> ZenohSettings:
    """Router settings: admin space readable (the console lists sessions), multicast off."""
    return ZenohSettings(
        mode="router",
        listen_endpoints=listen,
        adminspace=True,
        tls_listen_certificate=tls_cert,
        tls_listen_private_key=tls_key,
        tls_root_ca_certificate=tls_ca,
        extra_json5=config,
    )


def run_router(settings: ZenohSettings, stop: threading.Event | None = None) -> int:
    """Serve until SIGTERM/SIGINT (or `stop` is set); prints one ready line for supervisors and tests."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    session = open_session(settings)
    print(f"Zenoh router up: listening on {', '.join(settings.listen_endpoints)} (zid {session.zid()})", flush=True)
    try:
        stop.wait()
    finally:
        session.close()
    print("Zenoh router stopped", flush=True)
    return 0
