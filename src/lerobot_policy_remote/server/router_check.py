"""Does the router let robots find this replica? Asked once before the model loads (`lerobot-policy-server`).

Under a router with `--inventory` (default deny), a certificate that may not serve this replica in this
namespace (a robot's certificate, a server certificate bound to another namespace, a CN that is not the replica
id, a CN the inventory does not know) has every declaration dropped without a word to it: the server would print
its ready line and then never be found. The check: a probe queryable on this replica's own status key, and a
second session that asks that key through the router (a router never routes a query back to the session it came
from, hence two). The probe answers only its own nonce, so a robot's discovery in the same instant gets nothing
from it. Both sessions use the server's own settings and certificate, so the router judges them as it will
judge the server. Torch-free: it runs before the model is loaded.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from ..wire.keys import ServiceKeys
from ..zenoh_config import ZenohSettings, certificate_cn, certificate_role, open_session

log = logging.getLogger("lerobot.policy_server")

CHECK_PARAM = "router_check"
CHECK_WINDOW_S = 5.0  # how long the answer may take: a declaration reaches the router in milliseconds
QUERY_TIMEOUT_S = 0.5
RECHECK_S = 5.0  # router_refused=retry: the pause between two checks


def router_accepts(settings: ZenohSettings, key: str, window_s: float = CHECK_WINDOW_S) -> bool:
    """True when a query for `key` sent through the router reaches a queryable this process declares on `key`.

    Only for client mode (through a router); a peer-mode server has no router to refuse it."""
    import zenoh

    nonce = secrets.token_hex(8)
    token = nonce.encode()
    sessions: list[Any] = []
    try:
        probe = open_session(settings)
        sessions.append(probe)

        def answer(query: Any) -> None:
            with query:  # every other query (a robot's discovery) is dropped at once, unanswered
                if f"{CHECK_PARAM}={nonce}" in str(query.parameters):
                    query.reply(key, token)

        probe.declare_queryable(key, answer)
        asker = open_session(settings)
        sessions.append(asker)
        deadline = time.monotonic() + window_s
        while True:
            replies = asker.get(
                f"{key}?{CHECK_PARAM}={nonce}", timeout=QUERY_TIMEOUT_S, consolidation=zenoh.ConsolidationMode.NONE
            )
            if any(r.ok is not None and r.ok.payload.to_bytes() == token for r in replies):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)  # the declaration may not have reached the router yet
    finally:
        for s in reversed(sessions):
            try:
                s.close()
            except Exception as exc:  # the router went away meanwhile: nothing left to release
                log.debug("closing the router check's session: %s", exc)


def namespace_flag(model: str, revision: str, service: str) -> str:
    """The `--namespace` value of `lerobot-fleet pki issue` for one namespace."""
    return f"model={model},service={service}" + (f",revision={revision}" if revision and revision != "main" else "")


def refusal_message(
    settings: ZenohSettings,
    keys: ServiceKeys,
    replica: str,
    model: str,
    revision: str,
    service: str,
    replica_given: bool,
    window_s: float = CHECK_WINDOW_S,
) -> str:
    """One line: who the router saw (certificate CN and the role it was issued for), the namespace this replica
    tried, and the fix."""
    ns = namespace_flag(model, revision, service)
    where = f"namespace {ns!r} (replica {replica}, key {keys.server(replica, 'status')})"
    cert = settings.tls_connect_certificate
    if not cert:
        return (
            f"the router did not deliver a query for this replica's own status key to it within {window_s:g}s: its "
            f"access control (or its zenoh config) drops this replica's keys in {where}, so no robot or console can "
            "find it. Check the router's log and its access control (docs/security.md)"
        )
    try:
        cn = certificate_cn(cert)
    except (OSError, ValueError):
        cn = ""
    role = certificate_role(cert)
    issued = f"a {role} certificate" if role else "its role is not written in the certificate"
    logs = f"the router logs 'ACL refused: CN={cn or '?'} ...'"
    issue = f"lerobot-fleet pki issue DIR {{name}} --role server --namespace '{ns}'"
    if replica_given and cn and cn != replica:
        return (
            f"the router's access control refuses this replica: --zenoh.tls_connect_certificate={cert} is issued to "
            f"CN={cn} ({issued}) but --replica_id={replica}, and the router knows a server only by its certificate's "
            f"name ({logs}). Drop --replica_id (the replica is then {cn}) or pass the certificate issued for {replica} "
            f"({issue.format(name=replica)})"
        )
    head = (
        f"the router's access control refuses this replica: certificate CN={cn or '?'} ({issued}) may not serve "
        f"{where}, so no robot or console can find it ({logs})."
    )
    if role and role != "server":
        return (
            f"{head} Only a server certificate may serve: issue one ({issue.format(name='NAME')}), restart the router "
            "with the updated DIR/inventory.yaml and pass --zenoh.tls_connect_certificate=DIR/NAME.crt "
            "--zenoh.tls_connect_private_key=DIR/NAME.key"
        )
    name = cn or replica
    return (
        f"{head} The router's inventory must give server {name} this namespace: {issue.format(name=name)} (one "
        "--namespace per namespace it serves), then restart the router with the updated DIR/inventory.yaml"
    )


def router_refusal(manifest: Any, window_s: float = CHECK_WINDOW_S) -> str:
    """ "" when the router delivers this replica's status queries to it (or there is no router: peer mode); else the
    one-line refusal. Raises ZenohConfigError when the router cannot be reached at all."""
    settings = manifest.zenoh_settings()
    if settings.mode != "client":
        return ""
    keys, replica = manifest.keys(), manifest.replica()
    if router_accepts(settings, keys.server(replica, "status"), window_s):
        return ""
    return refusal_message(
        settings,
        keys,
        replica,
        manifest.model.repo_or_path,
        manifest.model.revision,
        manifest.service,
        bool(manifest.replica_id),
        window_s,
    )


class RouterWatch:
    """router_refused=retry: check again every `period_s` until the router accepts the replica, then call
    `accepted()` once. A daemon thread; `stop()` ends it."""

    def __init__(self, accepts: Callable[[], bool], accepted: Callable[[], None], period_s: float = RECHECK_S) -> None:
        self._accepts = accepts
        self._accepted = accepted
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="router-check", daemon=True)

    def start(self) -> RouterWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            try:
                ok = self._accepts()
            except Exception as exc:  # the router is down for a moment: the next check tells
                log.debug("router check failed: %s", exc)
                continue
            if ok:
                self._accepted()
                return
