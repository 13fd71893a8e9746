"""`--inference.type=remote`: every flag of the user guide, as one draccus config."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from lerobot.configs import RTCAttentionSchedule
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.rollout.inference.factory import InferenceEngineConfig

from ..zenoh_config import OBS_TX_QUEUE_BATCHES, ZenohSettings


class FallbackBehavior(str, Enum):
    HOLD = "hold"  # get_action -> None: the robot keeps its last commanded position
    REPEAT_LAST = "repeat_last"  # re-send the last executed action
    ZERO = "zero"  # zero every `.vel` feature (velocity robots); only after streaming began


@dataclass
class RemoteRTCConfig(RTCConfig):
    """Real Time Chunking over the network: the robot sends the unexecuted tail of its last chunk with each
    observation and the server's policy inpaints the new chunk to continue it. The server downgrades to
    plain chunks (logged at INFO) when its policy has no RTC."""

    # Ask the server for RTC chunks (replace-mode merge + prefixes). A policy without RTC gets plain
    # chunks: the server says so at INFO, nothing to change.
    enabled: bool = True
    # How the previous chunk's tail is weighted while inpainting (LINEAR, EXP, ONES, ZEROS).
    prefix_attention_schedule: RTCAttentionSchedule = RTCAttentionSchedule.LINEAR
    # Upper bound of the guidance weight towards the previous chunk's tail (> 0).
    max_guidance_weight: float = 10.0
    # Caps the prefix: steps of the previous chunk's tail sent with each observation.
    execution_horizon: int = 10
    # lerobot's RTC debug tracing (not used by the remote backend).
    debug: bool = False
    # lerobot's RTC debug trace length (not used by the remote backend).
    debug_maxlen: int = 100


@InferenceEngineConfig.register_subclass("remote")
@dataclass
class RemoteInferenceConfig(InferenceEngineConfig):
    """Weightless edge client: the policy runs in a `lerobot-policy-server` reached over Zenoh.

    Every flag here is listed by `lerobot-rollout --inference.type=remote --help` (docs/robot.md)."""

    # The Zenoh router to connect to (tcp/HOST:PORT, or tls/HOST:PORT with the tls_* flags).
    connect_endpoint: str = "tcp/localhost:7447"
    # Several routers: the session uses the first it reaches and fails over to the others. When set,
    # it replaces `connect_endpoint`.
    connect_endpoints: list[str] = field(default_factory=list)
    # With several endpoints: how long a lost server token may take to come back through another
    # router before the session is given up (one endpoint: given up at once).
    failover_grace_s: float = 1.0
    # Zenoh session mode: client (through a router, the default) or peer (direct, no router).
    zenoh_mode: str = "client"
    # This robot's certificate (PEM) for mTLS with a tls/ endpoint; its CN is the robot id.
    tls_cert: str | None = None
    # The private key (PEM) of --inference.tls_cert.
    tls_key: str | None = None
    # The CA certificate (PEM) that signed the router's certificate (mTLS).
    tls_ca: str | None = None
    # This robot's id in the fleet. Empty: the certificate's CN with mTLS, else a fresh uuid4 hex at start.
    client_uuid: str = ""
    # JPEG quality of the camera frames sent to the server (0..100); 0 sends raw frames (LAN/debug).
    jpeg_quality: int = 90
    # Send raw frames (no JPEG) when the replica is on this machine: the robot's link and the server's reach
    # one router (or each other) over zenoh shared memory, so the frames cross no network and JPEG would only
    # cost CPU on both sides. With false, frames always go at jpeg_quality.
    raw_frames_on_same_host: bool = True
    # Send observations straight to a replica on this machine (its loopback listener, offered in the session
    # ack), skipping the router hop both ways; tokens, telemetry and resets still go through the router. Never
    # with TLS (the router's access control must see everything). false: every message through the router.
    direct_on_same_host: bool = True
    # Shrink each camera frame to the model's trained input size (from the session ack) before encoding
    # (area interpolation): a 480x640 camera feeding a 120x160 model sends 16x fewer pixels. false sends
    # full frames and the server resizes them (docs/wire.md: parity of the two).
    resize_on_robot: bool = True
    # Reply precision asked of the server: float16 (each chunk whose every value survives float16 within
    # --inference.reply_max_error goes as float16, the others float32) or float32 (always).
    reply_dtype: str = "float16"
    # Largest absolute error, in action units, a float16 reply may carry (docs/wire.md says how to choose it).
    reply_max_error: float = 0.05
    # Send the next observation when the queued actions cover this many seconds or less.
    buffer_time_s: float = 0.5
    # Never execute an action whose source observation is older than this (the robot holds instead).
    max_action_age_s: float = 3.0
    # A request outstanding longer than this is late: STREAMING -> DEGRADED.
    degraded_after_s: float = 1.0
    # Per-request watchdog (a hung server): a request unanswered this long times out; 2 in a row -> RECONNECTING.
    request_timeout_s: float = 5.0
    # First wait of the exponential re-handshake backoff (a server token appearing retries at once).
    reconnect_initial_backoff_s: float = 0.5
    # Longest wait of the exponential re-handshake backoff.
    reconnect_max_backoff_s: float = 10.0
    # A random pause of up to this long before each session open, so robots that start or move together
    # (power back after a cut, a drain) read fresh seat counts and spread over the replicas.
    handshake_jitter_s: float = 0.1
    # Offline longer than this -> DEAD -> the rollout stops cleanly.
    max_offline_s: float = 60.0
    # What a tick without a fresh action sends: hold (nothing), repeat_last (the last action of this
    # episode), zero (velocity features 0, position features held; docs/robot.md).
    fallback: FallbackBehavior = FallbackBehavior.HOLD
    rtc: RemoteRTCConfig = field(default_factory=RemoteRTCConfig)
    # Model id the server must serve. Empty: --policy.path as given.
    service_model_id: str = ""
    # Model revision the server must serve.
    service_revision: str = "main"
    # Task (service) the server must serve. Empty: the rollout --task.
    service_task: str = ""
    # One INFO line per chunk received (lerobot.remote.chunks) and per chunk first executed
    # (lerobot.remote.provenance), joinable with the server's audit line. Off: those lines are DEBUG, and a
    # summary line comes at a session's first chunk and then every 10 s.
    log_every_chunk: bool = False
    # Free labels forwarded in the handshake, e.g. '{site: lab-2}'.
    tags: dict[str, str] = field(default_factory=dict)
    # How long startup waits for the first handshake before stopping with the reason (the robot never
    # moved); a refused port, a certificate problem or an unserved task is reported at once.
    connect_timeout_s: float = 10.0
    # Our Zenoh session's lease in ms: a hung robot is noticed in about this long.
    lease_ms: int = 1000
    # Samples in the windowed (decaying) max of the round trip used for the RTC delay.
    latency_window: int = 20
    # Seconds between RobotTelemetry messages to the console (also sent on every state change).
    telemetry_period_s: float = 1.0
    # Adaptive telemetry: while the state does not change, the period doubles from telemetry_period_s up to
    # this (a state change is sent at once and resets it). Equal to telemetry_period_s: a fixed rate.
    telemetry_max_period_s: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.fallback, str):
            self.fallback = FallbackBehavior(self.fallback)
        if not 0 <= self.jpeg_quality <= 100:
            raise ValueError(f"--inference.jpeg_quality must be 0..100 (0 = raw), got {self.jpeg_quality}")
        if self.reply_dtype not in ("float16", "float32"):
            raise ValueError(f"--inference.reply_dtype must be float16 or float32, got {self.reply_dtype!r}")
        if not 0 <= self.reply_max_error < 1e4:
            raise ValueError(f"--inference.reply_max_error must be >= 0, got {self.reply_max_error}")
        for name in (
            "buffer_time_s",
            "max_action_age_s",
            "degraded_after_s",
            "request_timeout_s",
            "reconnect_initial_backoff_s",
            "reconnect_max_backoff_s",
            "max_offline_s",
        ):
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
            block_wait_before_close_ms=int(self.request_timeout_s * 1000),
            tx_queue_data=OBS_TX_QUEUE_BATCHES,
        )
