"""Why the remote backend could not start, said once, at the end of `lerobot-rollout`'s output.

lerobot 0.6.1 calls `engine.start()` inside `strategy.setup()` with no handler but a `finally` that
tears the robot down, so our exception reaches the interpreter. We cannot catch it there; we can only
decide how the interpreter prints it: `install_excepthook()` prints a `RemoteStartupError` as its
message (the traceback only with LOG_LEVEL=DEBUG), and leaves every other exception to the default.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..advice import contract_advice, no_server_report, scoped_report
from ..discovery import Scope, ServiceInfo, certificate_scopes
from ..wire.codes import Refusal
from ..wire.text import printable
from ..zenoh_config import ROBOT_FLAGS, ZenohConfigError, without_rust_paths

if TYPE_CHECKING:
    from .handshake import HandshakeError

logger = logging.getLogger(__name__)
PREFIX = "Remote inference could not start: "
DEBUG_HINT = "(LOG_LEVEL=DEBUG prints the traceback; `lerobot-fleet doctor` checks the whole setup)"


class RemoteStartupError(RuntimeError):
    """A start failure whose message already says what to do; printed without a traceback."""


def doctor_command(cfg: Any) -> str:
    """The `lerobot-fleet doctor` line for the robot's own endpoint and certificate files."""
    parts = [f"lerobot-fleet doctor --router {cfg.endpoints()[0] if cfg.endpoints() else cfg.connect_endpoint}"]
    for flag, value in (("--tls-ca", cfg.tls_ca), ("--tls-cert", cfg.tls_cert), ("--tls-key", cfg.tls_key)):
        if value:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def router_unreachable(cfg: Any, exc: ZenohConfigError) -> RemoteStartupError:
    """The robot could not join the network: what the pre-flight probe found (refused port, certificates), else
    zenoh's reason."""
    endpoint = ", ".join(cfg.endpoints()) or cfg.connect_endpoint
    if exc.problem:
        return RemoteStartupError(f"{PREFIX}{exc.in_words(ROBOT_FLAGS)}. Check with: {doctor_command(cfg)}")
    zenoh_reason = without_rust_paths(str(exc.__cause__ or exc)).rstrip(".")
    tls = (
        "; check --inference.tls_ca, --inference.tls_cert and --inference.tls_key (RUST_LOG=warn shows zenoh's reason)"
        if "tls/" in endpoint
        else ""
    )
    return RemoteStartupError(
        f"{PREFIX}cannot reach the Zenoh router at {endpoint!r} "
        f"({ZenohConfigError(zenoh_reason).in_words(ROBOT_FLAGS)}). "
        f"Start the router (lerobot-fleet router --listen {endpoint.split(', ')[0]}) "
        f"or fix --inference.connect_endpoint{tls}. "
        f"Check with: {doctor_command(cfg)}"
    )


@dataclass(frozen=True)
class CertificateScope:
    """What the router lets this robot's certificate see: its CN and namespaces (`scopes` empty: not known)."""

    cn: str
    scopes: tuple[Scope, ...] = ()
    source: str = ""

    @property
    def bounded(self) -> bool:
        """The namespaces are known and not all of them: the router answers this robot only there."""
        return bool(self.scopes) and Scope() not in self.scopes

    def refuses(self, request: Any) -> bool:
        """The router answers nothing for this request: waiting for a server cannot help."""
        asked = (request.model_id, request.revision, request.service)
        return self.bounded and not any(s.covers(*asked) for s in self.scopes)


def certificate_scope(cert_path: str | None, cn: str) -> CertificateScope | None:
    """None without a certificate (no access control to speak of)."""
    if not cert_path:
        return None
    scopes, source = certificate_scopes(cert_path)
    return CertificateScope(cn, scopes, source)


def services_if_wrong_namespace(
    list_services: Callable[[float], list[ServiceInfo]], exc: HandshakeError
) -> list[ServiceInfo]:
    """When no replica of the robot's namespace answered but the router lists other services: those services.

    The router has answered, so waiting for the connect timeout changes nothing (a router with no service at
    all may still get its server: then [] and the caller keeps waiting)."""
    if exc.code != Refusal.NO_SERVER:
        return []
    try:
        return list_services(1.0)
    except Exception as err:  # listing is a courtesy
        logger.debug("could not list services: %s", err)
        return []


def handshake_failed(
    list_services: Callable[[float], list[ServiceInfo]],
    request: Any,
    exc: HandshakeError,
    services: list[ServiceInfo] | None = None,
    tls: bool = False,
    scope: CertificateScope | None = None,
) -> RemoteStartupError:
    """Turn the last handshake failure (a HandshakeError) into advice; lists the network's services when nobody
    answered.

    `scope`: under mTLS, what the router lets the robot's certificate see; a certificate bound to some namespaces
    is told what serves there and how to reach what it asked (its own wildcard listing sees nothing)."""
    if exc.code == Refusal.NO_SERVER:
        try:
            services = services or list_services(2.0)
        except Exception as err:  # listing is a courtesy: fall back to the namespace rule
            logger.debug("could not list services: %s", err)
            return RemoteStartupError(f"{PREFIX}{exc}")
        if scope is not None and scope.bounded:
            report = scoped_report(
                services,
                request.model_id,
                request.revision,
                request.service,
                scope.cn,
                scope.scopes,
                scope.source,
                request.policy_type,
            )
            return RemoteStartupError(PREFIX + report)
        report = no_server_report(services, request.model_id, request.revision, request.service, request.policy_type)
        if not services and tls:  # under an ACL a certificate the inventory does not know sees nothing at all
            report += (
                f". With mTLS this is also what a robot whose certificate the router's access control does not know "
                f"sees: the robot id CN={request.client_uuid} must be a robot in the router's inventory "
                f"(lerobot-fleet pki issue DIR {request.client_uuid} --role robot); the router logs 'ACL refused: "
                f"CN={request.client_uuid} ...'"
            )
        return RemoteStartupError(f"{PREFIX}{report}")
    advice = contract_advice(exc.refusal)  # all replicas refused: the last one's reason (server_full, draining)
    return RemoteStartupError(f"{PREFIX}{exc}" + (f". To fix: {advice}" if advice else ""))


def nothing_executed(counters: Any, dead_reason: str, robot_id: str, id_source: str, tls: bool, replica: str) -> str:
    """Why a rollout ended without executing one remote action, and what to do (the rollout then exits 1)."""
    if dead_reason:
        return f"remote inference went DEAD: {dead_reason}"
    sent, timeouts = counters["requests"], counters["timeouts"]
    if not sent:
        return (
            "the robot sent no observation: the rollout ended before the first one (a --duration too short?) or "
            "the control loop never fed the engine"
        )
    if timeouts and not counters["chunks"]:
        where = f"replica {replica}" if replica else "the server"
        if tls:
            origin = "its certificate's name" if id_source == "certificate" else "--inference.client_uuid"
            return (
                f"{where} never answered this robot's {sent} observation(s) ({timeouts} request timeouts). "
                "With mTLS the router drops what a certificate may not send: "
                f"the robot id {robot_id} (from {origin}) must be a robot in "
                f"the router's inventory with that certificate; the router logs 'ACL refused: CN=...' for each refusal"
            )
        return (
            f"{where} never answered this robot's {sent} observation(s) ({timeouts} request timeouts): check the "
            "server's log (is it stuck or overloaded?) and `lerobot-fleet status`"
        )
    return f"no chunk could be executed ({dict(counters)}): check `lerobot-fleet status` and the server's log"


def causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what it was raised from (or while handling), outermost first."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def policy_path_failed(path: str, exc: BaseException) -> RemoteStartupError:
    """lerobot could not read the policy's config.json from `--policy.path`: what is wrong with the path, and the fix.

    The robot reads only the config (no weights), from a local checkpoint directory or a hub repo id; the server
    must serve the same path/id (its `model.repo_or_path`), which is also the namespace robots dial."""
    names = {type(e).__name__ for e in causes(exc)}
    local = os.path.expanduser(path)
    same = (
        "the robot reads only its config.json (no weights): pass the checkpoint directory or hub repo id the server "
        "serves (its model.repo_or_path; `lerobot-fleet status` lists what the router offers)"
    )
    looks_local = path.startswith((".", "/", "~")) or os.path.exists(local) or path.count("/") != 1
    if os.path.isdir(local):
        why = (
            f"{path} is a directory without config.json: point it at the pretrained_model directory of a training run "
            "(e.g. outputs/train/.../checkpoints/last/pretrained_model)"
        )
    elif os.path.exists(local):
        why = f"{path} is a file: pass the directory that holds the policy's config.json"
    elif looks_local or "HFValidationError" in names:
        why = f"no directory {path} on this machine, and it is not a hub repo id like 'org/name'"
    elif names & {"RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError", "EntryNotFoundError"}:
        why = (
            f"the hub has no config.json for {path} "
            "(no such repo or revision, or it is private: log in with `hf auth login`)"
        )
    elif names & {
        "LocalEntryNotFoundError",
        "ConnectError",
        "ConnectionError",
        "OfflineModeIsEnabled",
        "TimeoutException",
    }:
        why = (
            f"no directory {path} on this machine, and its config.json could not be fetched from the hub "
            "(no network, or HF_HUB_OFFLINE, and not in the local cache)"
        )
    else:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        why = f"lerobot could not read the policy config at {path} ({type(exc).__name__}: {printable(first, 200)})"
    return RemoteStartupError(f"{PREFIX}--policy.path={path}: {why}; {same}")


def _print_startup_error(exc_type: type[BaseException], exc: BaseException, tb: Any, previous: Any) -> None:
    if not issubclass(exc_type, RemoteStartupError):
        previous(exc_type, exc, tb)
        return
    if os.environ.get("LOG_LEVEL", "").upper() == "DEBUG":
        traceback.print_exception(exc_type, exc, tb)
    print(f"\nlerobot-rollout: {exc}\n{DEBUG_HINT}", file=sys.stderr, flush=True)


def install_excepthook() -> None:
    """Idempotent; chains to whatever hook was there before."""
    if getattr(sys.excepthook, "_remote_startup", False):
        return
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        _print_startup_error(exc_type, exc, tb, previous)

    hook._remote_startup = True  # type: ignore[attr-defined]
    sys.excepthook = hook
