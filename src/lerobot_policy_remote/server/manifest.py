"""The server manifest: a draccus dataclass (YAML via --manifest, every field overridable on the CLI).

Why a single dataclass: one process serves exactly one (model, revision, dtype, device); everything an
operator can tune lives here and is validated before any weight is loaded, with messages that say
what to fix.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field

from ..wire.errors import WireError
from ..wire.keys import ServiceKeys, check_id
from ..wire.messages import RtcSettings
from ..zenoh_config import ZenohSettings

SERVING_MODES = ("auto", "exclusive", "shared")
DTYPES = ("", "float32", "float16", "bfloat16")


class ManifestError(ValueError):
    """A manifest value that cannot work; the message names the field and the fix."""


@dataclass
class ModelSpec:
    repo_or_path: str = ""
    revision: str = "main"
    dtype: str = ""  # "" keeps the checkpoint dtype; float32 | float16 | bfloat16 casts after load
    device: str = "cpu"


def _server_rtc() -> RtcSettings:
    """The server offers RTC by default (the wire's default is the robot's 'off')."""
    return RtcSettings(enabled=True)


RtcSpec = RtcSettings  # old name, kept for callers not yet moved to the wire's type


@dataclass
class BatchingSpec:
    """Cross-robot micro-batching of shared-mode sessions (docs/server.md, "Batching")."""

    max_batch: int = 1  # robots per forward pass; 1 = one robot per pass (no batching)
    max_wait_ms: float = 0.0  # 0 = opportunistic (never wait while a robot is ready); > 0 waits this long to fill a batch


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
    rtc: RtcSettings = field(default_factory=_server_rtc)
    replica_id: str = ""  # "" -> <hostname>-<pid>
    health_port: int = 9100  # /healthz + /metrics; 0 disables
    health_host: str = "127.0.0.1"
    advertise_host: str = ""  # host in ServerStatus.metrics_url; "" -> health_host
    session_grace_s: float = 10.0  # a robot's liveliness token must be gone this long before GC
    drain_timeout_s: float = 30.0  # the longest a drain waits for pending work
    max_obs_bytes: int = 16 * 1024 * 1024  # observations above this are refused before decoding
    batching: BatchingSpec = field(default_factory=BatchingSpec)
    debug: DebugSpec = field(default_factory=DebugSpec)
    zenoh: ZenohSettings = field(default_factory=lambda: ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"]))

    # ------------------------------------------------------------------ derived
    @property
    def service(self) -> str:
        return self.service_name or self.default_task

    def keys(self) -> ServiceKeys:
        return ServiceKeys.for_service(self.model.repo_or_path, self.model.revision or "main", self.service)

    def replica(self) -> str:
        return self.replica_id or default_replica_id()

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
        if self.session_grace_s < 0 or self.drain_timeout_s < 0:
            raise ManifestError("session_grace_s and drain_timeout_s must be >= 0")
        if self.batching.max_batch < 1:
            raise ManifestError(f"batching.max_batch must be at least 1 (1 disables batching), got {self.batching.max_batch}")
        if not 0 <= self.batching.max_wait_ms <= 1000:
            raise ManifestError(f"batching.max_wait_ms must be between 0 (opportunistic) and 1000, got {self.batching.max_wait_ms}")
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
        self.zenoh.validate()


def default_replica_id() -> str:
    """`<hostname>-<pid>` reduced to the id alphabet of the key tree."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip("-._") or "server"
    return f"{host[:50]}-{os.getpid()}"
