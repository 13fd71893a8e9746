"""The server manifest: a draccus dataclass (YAML via --manifest, every field overridable on the CLI).

Why a single dataclass: one process serves exactly one (model, revision, dtype, device); everything an
operator can tune lives here and is validated before any weight is loaded, with messages that say
what to fix.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import typing
from dataclasses import dataclass, field

from ..wire.errors import WireError
from ..wire.keys import ServiceKeys, check_id
from ..wire.messages import RtcSettings
from ..zenoh_config import ZenohSettings, certificate_cn

SERVING_MODES = ("auto", "exclusive", "shared")
DEFAULT_ROUTER = "tcp/127.0.0.1:7447"  # client mode with no connect endpoint given dials this
DTYPES = ("", "float32", "float16", "bfloat16")
COMPILE_CHOICES = ("auto", "off", "on")
ROUTER_REFUSED = ("exit", "retry")


class ManifestError(ValueError):
    """A manifest value that cannot work; the message names the field and the fix."""


@dataclass
class ModelSpec:
    repo_or_path: str = ""
    revision: str = "main"
    dtype: str = ""  # "" keeps the checkpoint dtype; float32 | float16 | bfloat16 casts after load
    device: str = "cpu"
    # auto: compiled (torch.compile, CUDA graphs) on CUDA, eager elsewhere; on | off (server/compiled.py)
    compile: str = "auto"
    compile_buckets: list[int] = field(default_factory=list)  # batch sizes compiled; [] = 1, 2, 4, ... max_batch
    compile_cache_dir: str = ""  # where compiled artefacts persist; "" = ~/.cache/lerobot_policy_remote/compile

    def __post_init__(self) -> None:
        self.compile = compile_choice(self.compile)


def compile_choice(value: object) -> str:
    """`model.compile` as written: YAML (and so draccus on the command line) reads a bare on / off as a boolean."""
    text = str(value).strip().lower()
    return {"true": "on", "false": "off"}.get(text, text)


def _server_rtc() -> RtcSettings:
    """The server offers RTC by default (the wire's default is the robot's 'off')."""
    return RtcSettings(enabled=True)


RtcSpec = RtcSettings  # old name, kept for callers not yet moved to the wire's type


AUTO_MAX_BATCH = 8  # batching.max_batch when unset and the policy can batch (docs/server.md, "Batching")


@dataclass
class BatchingSpec:
    """Cross-robot micro-batching of shared-mode sessions (docs/server.md, "Batching")."""

    # robots per forward pass; None (default) = AUTO_MAX_BATCH when the policy can batch (shared, chunk-stateless),
    # else 1; 1 = one robot per pass (no batching)
    max_batch: int | None = None
    # None (default) = derived: wait up to half the measured pass time for robots due within it (never for a lone
    # robot); 0 = opportunistic (never wait while a robot is ready); > 0 waits this long
    max_wait_ms: float | None = None

    def limit(self, can_batch: bool) -> int:
        """Robots per pass for a policy that can (or cannot) batch: an operator's value, else the default."""
        if not can_batch:
            return 1
        return AUTO_MAX_BATCH if self.max_batch is None else self.max_batch


@dataclass
class DebugSpec:
    capture_dir: str | None = None  # directory for request/response pairs (safetensors); None disables
    capture_max: int = 256  # ring size: the oldest pair is deleted beyond this


@dataclass
class Manifest:
    model: ModelSpec = field(default_factory=ModelSpec)
    default_task: str = ""
    service_name: str = ""  # "" -> default_task (percent-escaped into the key)
    pin_task: bool = False
    serving_mode: str = "auto"  # auto | exclusive ("shared" is accepted but never overrides stateful)
    max_sessions: int = 4
    warmup_inferences: int = 2
    trained_fps: float = 30.0
    strict_fps: bool = False
    fps_tolerance: float = 0.05  # relative fps difference tolerated before a warning / rejection
    action_feature_names: list[str] = field(default_factory=list)  # ordered; verifies the robot's order
    strict_action_names: bool = False  # refuse robots whose action order cannot be checked (no names known)
    rtc: RtcSettings = field(default_factory=_server_rtc)
    replica_id: str = (
        ""  # "" -> the certificate's CN (mTLS), else <hostname>-<health_port> (<hostname>-<pid> without one)
    )
    health_port: int = 9100  # /healthz + /metrics; 0 disables
    health_host: str = "127.0.0.1"
    advertise_host: str = ""  # host in ServerStatus.metrics_url; "" -> health_host
    session_grace_s: float = 10.0  # a robot's liveliness token must be gone this long before GC
    drain_timeout_s: float = 30.0  # the longest a drain waits for pending work
    reclaim_idle_s: float = 10.0  # a full replica frees a seat idle this long for a robot that asks (0: never)
    max_obs_bytes: int = 16 * 1024 * 1024  # observations above this are refused before decoding
    batching: BatchingSpec = field(default_factory=BatchingSpec)
    debug: DebugSpec = field(default_factory=DebugSpec)
    # Offer robots on this host a loopback link that skips the router (server/direct.py); never under TLS.
    direct_link: bool = True
    # A router whose access control refuses this replica's keys (router_check.py): exit (status 2) or retry
    # (keep serving /healthz as failing and check again until the router accepts it; for orchestrators).
    router_refused: str = "exit"
    # Client mode with no connect endpoint dials DEFAULT_ROUTER; peer mode dials only what is listed.
    zenoh: ZenohSettings = field(default_factory=lambda: ZenohSettings(mode="client"))

    # ------------------------------------------------------------------ derived
    @property
    def service(self) -> str:
        return self.service_name or self.default_task

    def keys(self) -> ServiceKeys:
        return ServiceKeys.for_service(self.model.repo_or_path, self.model.revision or "main", self.service)

    def replica(self) -> str:
        """The replica id: `replica_id`, else the name (CN) of the mTLS certificate (the router's access control
        knows a server by it), else `<hostname>-<health_port>`: stable across restarts on one machine, unique there
        because only one process can hold the port (`<hostname>-<pid>` when health_port=0)."""
        if self.replica_id:
            return self.replica_id
        return certificate_id(self.zenoh.tls_connect_certificate) or default_replica_id(self.health_port)

    def zenoh_settings(self) -> ZenohSettings:
        """The session's settings: client mode without an endpoint dials the local router; peer mode keeps
        exactly the endpoints given (a LAN server listens, and needs no loopback connect)."""
        z = self.zenoh
        if z.mode == "client" and not z.connect_endpoints:
            return dataclasses.replace(z, connect_endpoints=[DEFAULT_ROUTER])
        return z

    def validate(self) -> None:
        """Fail before loading weights, naming the field and how to fix it."""
        if not self.model.repo_or_path:
            raise ManifestError("model.repo_or_path is empty: set it to a hub repo id or a local checkpoint directory")
        if not self.service:
            raise ManifestError(
                "neither service_name nor default_task is set: the service namespace needs one "
                "(robots dial (model, revision, task)); set default_task to the task the policy was trained on"
            )
        if self.serving_mode not in SERVING_MODES:
            raise ManifestError(f"serving_mode {self.serving_mode!r} is not one of {', '.join(SERVING_MODES)}")
        if self.model.dtype not in DTYPES:
            raise ManifestError(f"model.dtype {self.model.dtype!r} is not one of {', '.join(repr(d) for d in DTYPES)}")
        if self.model.compile not in COMPILE_CHOICES:
            raise ManifestError(
                f"model.compile {self.model.compile!r} is not one of {', '.join(COMPILE_CHOICES)} "
                "(auto compiles on CUDA and serves eagerly elsewhere)"
            )
        if any(size < 1 for size in self.model.compile_buckets):
            raise ManifestError(f"model.compile_buckets must be batch sizes >= 1, got {self.model.compile_buckets}")
        if self.max_sessions < 1:
            raise ManifestError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.warmup_inferences < 0:
            raise ManifestError(f"warmup_inferences must be >= 0, got {self.warmup_inferences}")
        if self.trained_fps <= 0:
            raise ManifestError(f"trained_fps must be > 0, got {self.trained_fps}")
        if not 0 <= self.health_port <= 65535:
            raise ManifestError(f"health_port must be 0 (disabled) or a TCP port, got {self.health_port}")
        if self.rtc.execution_horizon < 1:
            raise ManifestError("rtc.execution_horizon must be at least 1")
        if self.rtc.max_guidance_weight <= 0:
            raise ManifestError("rtc.max_guidance_weight must be > 0")
        if self.session_grace_s < 0 or self.drain_timeout_s < 0 or self.reclaim_idle_s < 0:
            raise ManifestError("session_grace_s, drain_timeout_s and reclaim_idle_s must be >= 0")
        if self.batching.max_batch is not None and self.batching.max_batch < 1:
            raise ManifestError(
                f"batching.max_batch must be at least 1 (1 disables batching), got {self.batching.max_batch}"
            )
        if self.batching.max_wait_ms is not None and not 0 <= self.batching.max_wait_ms <= 1000:
            raise ManifestError(
                f"batching.max_wait_ms must be between 0 (opportunistic) and 1000, got {self.batching.max_wait_ms}"
            )
        if self.router_refused not in ROUTER_REFUSED:
            raise ManifestError(f"router_refused {self.router_refused!r} is not one of {', '.join(ROUTER_REFUSED)}")
        if self.debug.capture_max < 1:
            raise ManifestError("debug.capture_max must be at least 1")
        if len(set(self.action_feature_names)) != len(self.action_feature_names):
            raise ManifestError("action_feature_names has duplicates: list each action name once, in policy order")
        try:
            self.keys()
            if self.replica_id:
                check_id(self.replica_id, "replica_id")
        except WireError as exc:
            raise ManifestError(str(exc)) from None
        settings = self.zenoh_settings()
        if settings.mode == "peer" and not (settings.listen_endpoints or settings.connect_endpoints):
            raise ManifestError(
                "zenoh.mode=peer needs zenoh.listen_endpoints (e.g. '[tcp/0.0.0.0:7447]') so robots can "
                "dial this server, or zenoh.connect_endpoints to dial a peer"
            )
        settings.validate()


# One line per manifest field, in the words an operator needs; `--help` prints every field with its type and
# default (tests/server/test_manifest_units.py fails when a field has no line here).
FIELD_HELP: dict[str, str] = {
    "model.repo_or_path": (
        "hub repo id or local checkpoint directory (config.json, model.safetensors, processor files); required"
    ),
    "model.revision": "hub revision to load (ignored for a local directory); also part of the service key",
    "model.dtype": "'' keeps the checkpoint dtype; float32, float16 or bfloat16 casts after loading",
    "model.device": "torch device the policy runs on (cpu, cuda, cuda:1, mps)",
    "model.compile": (
        "auto, on or off: a compiled pass per batch bucket (torch.compile; CUDA graphs on a GPU) for pi0, pi0.5 "
        "and SmolVLA; auto is on for CUDA, off on the CPU; a compile that fails serves eagerly with one WARNING"
    ),
    "model.compile_buckets": (
        "batch sizes compiled, e.g. '[1,4,8]' (a pass pads to the next one); [] = 1, 2, 4, ... up to max_batch"
    ),
    "model.compile_cache_dir": (
        "directory where compiled kernels persist, so a restart on this machine compiles from cache; "
        "'' = ~/.cache/lerobot_policy_remote/compile"
    ),
    "default_task": (
        "task used when a robot sends none; also the default service name robots dial (--task on the robot)"
    ),
    "service_name": "service key segment robots dial; '' means default_task",
    "pin_task": "refuse robots whose task differs from default_task (task_mismatch)",
    "serving_mode": (
        "auto or exclusive; auto shares verified chunk-stateless policies and serves the rest one robot at a time"
    ),
    "max_sessions": "robots served at once in shared mode (an exclusive policy always serves 1)",
    "warmup_inferences": "throwaway forward passes before 'Policy server up'",
    "trained_fps": "control rate the policy was trained at; robots at another rate get a warning",
    "strict_fps": "refuse robots whose fps differs from trained_fps by more than fps_tolerance",
    "fps_tolerance": "relative fps difference tolerated before the warning (or refusal with strict_fps)",
    "action_feature_names": (
        "the training data's action names in order (the dataset's meta/info.json "
        "features.action.names); enables the action name+order check"
    ),
    "strict_action_names": "refuse robots when the action order cannot be checked (no names from the manifest, "
    "the policy config or a dataset meta/info.json beside the checkpoint)",
    "rtc.enabled": "offer real-time chunking (only RTC-capable policies: pi0, pi05, smolvla)",
    "rtc.execution_horizon": "default RTC execution horizon (a robot's own setting overrides it per request)",
    "rtc.max_guidance_weight": "default RTC guidance weight (overridden per robot)",
    "rtc.prefix_attention_schedule": "default RTC prefix schedule: ZEROS, ONES, LINEAR or EXP",
    "replica_id": "this replica's id in keys, logs and metrics; '' means the mTLS certificate's CN, else "
    "<hostname>-<health_port> (the same after a restart), or <hostname>-<pid> with health_port=0",
    "health_port": "port of GET /healthz and GET /metrics; 0 disables both",
    "health_host": (
        "address /healthz and /metrics bind; 127.0.0.1 is this machine only, 0.0.0.0 lets Prometheus scrape it"
    ),
    "advertise_host": "host written into the status' metrics_url (the console links it); '' means health_host",
    "session_grace_s": "a session is closed this long after its robot's liveliness token disappeared",
    "drain_timeout_s": "longest a drain (SIGTERM, lerobot-fleet drain) waits for pending requests",
    "reclaim_idle_s": (
        "shared mode, when full: a session that sent nothing this long gives its seat to a robot asking "
        "for one; 0 never"
    ),
    "max_obs_bytes": "observations larger than this are refused before decoding (errors_total{reason=oversize})",
    "router_refused": (
        "when the router's access control refuses this replica's keys: exit (status 2, one line naming "
        "the fix) or retry (serve /healthz as failing and check again every few seconds; for orchestrators)"
    ),
    "direct_link": (
        "offer robots on this host a loopback listener that skips the router (never under TLS); "
        "false: all through the router"
    ),
    "batching.max_batch": (
        f"robots per forward pass in shared mode; unset: {AUTO_MAX_BATCH} when the policy can batch; 1 is no batching"
    ),
    "batching.max_wait_ms": (
        "unset: wait up to half a measured pass for robots whose next observation is due within "
        "it; 0: batch whoever is ready now; > 0: wait up to this long for a pass to fill (max 1000)"
    ),
    "debug.capture_dir": "directory for a ring of captured requests (wire bytes, header, settings) and chunks; "
    "replay them with `lerobot-policy-server replay DIR`; null disables",
    "debug.capture_max": "captures kept in the ring; the oldest is deleted beyond this",
    "zenoh.mode": "client (dial a router), peer (no router: listen and/or dial peers) or router",
    "zenoh.connect_endpoints": (
        f"endpoints to dial, e.g. '[tcp/router:7447]'; client mode with none dials {DEFAULT_ROUTER}"
    ),
    "zenoh.listen_endpoints": "endpoints to listen on, e.g. '[tcp/0.0.0.0:7447]' (peer mode on a LAN)",
    "zenoh.tls_root_ca_certificate": "CA file that signed the router's certificate (needed for tls/ endpoints)",
    "zenoh.tls_connect_certificate": "this replica's client certificate (mTLS; its CN must be replica_id under an ACL)",
    "zenoh.tls_connect_private_key": "the private key of tls_connect_certificate",
    "zenoh.tls_listen_certificate": "certificate for tls/ listen endpoints",
    "zenoh.tls_listen_private_key": "the private key of tls_listen_certificate",
    "zenoh.tls_enable_mtls": "force mTLS on or off; null decides from the files given",
    "zenoh.lease_ms": "this session's Zenoh lease: a hung server is noticed after about this long",
    "zenoh.keep_alive": "keep-alive messages per lease",
    "zenoh.connect_timeout_ms": "how long startup waits for the router (-1 waits forever)",
    "zenoh.retry_period_init_ms": "first reconnect delay after the router went away",
    "zenoh.retry_period_max_ms": "longest reconnect delay",
    "zenoh.shared_memory": "use Zenoh shared memory with peers on the same machine",
    "zenoh.adminspace": "expose Zenoh's admin space (read-only)",
    "zenoh.tx_queue_interactive_high": "TX queue depth for chunks; 0 keeps Zenoh's default (a batching server uses 16)",
    "zenoh.tx_queue_data": (
        "TX queue depth for observations and other DATA-priority messages; 0 keeps Zenoh's default "
        "(robots and routers use 16)"
    ),
    "zenoh.max_message_bytes": (
        "largest message Zenoh reassembles (bytes); 0: max_obs_bytes + 64 KiB (Zenoh's own default is 1 GiB)"
    ),
    "zenoh.block_wait_before_close_ms": (
        "how long a BLOCK put may wait for tx queue room before Zenoh closes the link; 0 keeps Zenoh's 5 s"
    ),
    "zenoh.gossip": (
        "peers learn each other's locators through a router; null: on in peer and router mode, off in client mode"
    ),
    "zenoh.extra_json5": "a JSON5 file or inline JSON5 merged last into the Zenoh config",
}


def _type_name(tp: object) -> str:
    text = str(tp).replace("typing.", "")
    return getattr(tp, "__name__", text) if not typing.get_args(tp) else text


def manifest_fields(instance: object = None, prefix: str = "") -> list[tuple[str, str, object]]:
    """Every leaf field of the manifest as (dotted name, type, default), nested dataclasses flattened.

    Nested defaults are read from the manifest's own instance (the server's RTC default differs from the wire's)."""
    instance = Manifest() if instance is None else instance
    hints = typing.get_type_hints(type(instance))
    out: list[tuple[str, str, object]] = []
    for f in dataclasses.fields(instance):  # type: ignore[arg-type]
        tp, value = hints[f.name], getattr(instance, f.name)
        if dataclasses.is_dataclass(value):
            out += manifest_fields(value, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, _type_name(tp), value))
    return out


def manifest_help() -> str:
    """`--help`'s field list: each field with its type, default and one line."""
    lines = []
    for name, tp, default in manifest_fields():
        shown = "(required)" if name == "model.repo_or_path" else f"default: {default!r}"
        lines.append(f"  --{name}  {tp}  [{shown}]\n      {FIELD_HELP.get(name, '(undocumented)')}")
    return "\n".join(lines)


def default_replica_id(health_port: int = 0) -> str:
    """`<hostname>-<health_port>` reduced to the id alphabet of the key tree; `<hostname>-<pid>` without a health port.

    Only one process on a machine can hold the health port, so the id is unique there and the same after a restart:
    the console's row for the replica comes back instead of a new row beside a `gone` one."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip("-._") or "server"
    return f"{host[:50]}-{health_port or os.getpid()}"


def certificate_id(cert_path: str | None) -> str:
    """The CN of an mTLS client certificate when it is a valid replica id, else "" (no certificate, unreadable)."""
    if not cert_path:
        return ""
    try:
        return check_id(certificate_cn(cert_path), "replica_id")
    except (OSError, ValueError, WireError):
        return ""
