"""`--inference.type=remote`: every flag of the user guide, as one draccus config."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.rollout.inference.factory import InferenceEngineConfig

from ..zenoh_config import ZenohSettings


class FallbackBehavior(str, Enum):
    HOLD = "hold"  # get_action -> None: the robot keeps its last commanded position
    REPEAT_LAST = "repeat_last"  # re-send the last executed action
    ZERO = "zero"  # zero every `.vel` feature (velocity robots); only after streaming began


@InferenceEngineConfig.register_subclass("remote")
@dataclass
class RemoteInferenceConfig(InferenceEngineConfig):
    """Weightless edge client: the policy runs in a `lerobot-policy-server` reached over Zenoh."""

    connect_endpoint: str = "tcp/localhost:7447"
    # Several routers: the session uses the first it reaches and fails over to the others. When set,
    # it replaces `connect_endpoint`.
    connect_endpoints: list[str] = field(default_factory=list)
    # With several endpoints: how long a lost server token may take to come back through another
    # router before the session is given up (one endpoint: given up at once).
    failover_grace_s: float = 1.0
    zenoh_mode: str = "client"
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    client_uuid: str = ""  # "" -> a fresh uuid4 hex at start()
    jpeg_quality: int = 90  # 0 = raw frames (LAN/debug)
    buffer_time_s: float = 0.5  # send the next observation when queue playback <= this
    max_action_age_s: float = 3.0  # never execute an action whose source observation is older
    degraded_after_s: float = 1.0
    request_timeout_s: float = 5.0
    reconnect_initial_backoff_s: float = 0.5
    reconnect_max_backoff_s: float = 10.0
    # A random pause of up to this long before each session open, so robots that start or move together
    # (power back after a cut, a drain) read fresh seat counts and spread over the replicas.
    handshake_jitter_s: float = 0.1
    max_offline_s: float = 60.0
    fallback: FallbackBehavior = FallbackBehavior.HOLD
    rtc: RTCConfig = field(default_factory=RTCConfig)
    service_model_id: str = ""  # "" -> --policy.path as given
    service_revision: str = "main"
    service_task: str = ""  # "" -> the rollout --task
    tags: dict[str, str] = field(default_factory=dict)
    # Not in the guide's table but needed to be honest about timing: how long start() waits for the
    # first handshake before aborting the rollout (a bad deployment fails before the robot moves).
    connect_timeout_s: float = 10.0
    lease_ms: int = 1000  # our session's lease: a hung robot is noticed in about a second
    latency_window: int = 20  # samples in the windowed delay statistic
    telemetry_period_s: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.fallback, str):
            self.fallback = FallbackBehavior(self.fallback)
        if not 0 <= self.jpeg_quality <= 100:
            raise ValueError(f"--inference.jpeg_quality must be 0..100 (0 = raw), got {self.jpeg_quality}")
        for name in ("buffer_time_s", "max_action_age_s", "degraded_after_s", "request_timeout_s",
                     "reconnect_initial_backoff_s", "reconnect_max_backoff_s", "max_offline_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--inference.{name} must be > 0, got {getattr(self, name)}")
        if self.handshake_jitter_s < 0:
            raise ValueError(f"--inference.handshake_jitter_s must be >= 0, got {self.handshake_jitter_s}")
        if self.reconnect_max_backoff_s < self.reconnect_initial_backoff_s:
            raise ValueError("--inference.reconnect_max_backoff_s must be >= reconnect_initial_backoff_s")

    def endpoints(self) -> list[str]:
        """`--inference.connect_endpoints` when given, else the single `--inference.connect_endpoint`."""
        if self.connect_endpoints:
            return list(self.connect_endpoints)
        return [self.connect_endpoint] if self.connect_endpoint else []

    def zenoh_settings(self) -> ZenohSettings:
        """The robot's own session: client mode through a router by default, short lease."""
        return ZenohSettings(
            mode=self.zenoh_mode,
            connect_endpoints=self.endpoints(),
            tls_root_ca_certificate=self.tls_ca,
            tls_connect_certificate=self.tls_cert,
            tls_connect_private_key=self.tls_key,
            lease_ms=self.lease_ms,
            keep_alive=4,
            connect_timeout_ms=int(self.connect_timeout_s * 1000),
            retry_period_init_ms=100,
            retry_period_max_ms=500,
        )
