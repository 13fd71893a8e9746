"""Control-plane message bodies: sessions, status, events, telemetry, audit (docs/wire.md).

Plain dataclasses run through :mod:`.codec`: sessions, status, events, telemetry, audit. This module
imports neither numpy, cv2, PIL nor torch, so the console and every `lerobot-fleet` verb load only
this part of the wire. The array-carrying bodies (observation, action chunk) live in :mod:`.data`.
Every field added later must have a default (additive-only evolution).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import SchemaVersionError

SCHEMA_VERSION = 1
SCHEMA_MIN = 1
SCHEMA_MAX = 1


def negotiate_schema(
    client_min: int, client_max: int, server_min: int = SCHEMA_MIN, server_max: int = SCHEMA_MAX
) -> int:
    """Highest version both sides speak; SchemaVersionError when the ranges do not overlap."""
    low, high = max(client_min, server_min), min(client_max, server_max)
    if low > high:
        raise SchemaVersionError(
            "schema_version",
            f"client speaks {client_min}..{client_max}, server speaks {server_min}..{server_max}: "
            "upgrade the older side",
        )
    return high


# ---------------------------------------------------------------- control plane


@dataclass
class RtcSettings:
    """The client's RTC intent; the server honours it (or downgrades to append)."""

    enabled: bool = False
    execution_horizon: int = 10
    max_guidance_weight: float = 10.0
    prefix_attention_schedule: str = "LINEAR"


@dataclass
class FeatureSpec:
    """One observation feature the robot will send: kind is 'image' or 'state'."""

    name: str
    kind: str
    shape: list[int] = field(default_factory=list)


@dataclass
class ModelInfo:
    repo_or_path: str = ""
    revision: str = ""
    policy_type: str = ""
    fingerprint: str = ""
    dtype: str = ""
    device: str = ""


@dataclass
class SessionOpen:
    client_uuid: str
    action_names: list[str]
    features: list[FeatureSpec] = field(default_factory=list)
    model_id: str = ""
    revision: str = ""
    service: str = ""
    policy_type: str = ""
    fps: float = 0.0
    task: str = ""
    schema_min: int = SCHEMA_MIN
    schema_max: int = SCHEMA_MAX
    rtc: RtcSettings = field(default_factory=RtcSettings)
    tags: dict[str, str] = field(default_factory=dict)
    expect_fingerprint: str = ""
    dry_run: bool = False  # run every check and answer, but open no session (`lerobot-fleet doctor`)
    # Reply shape the robot asks for (old servers ignore both and send float32, both spaces):
    # "float16" replies when every value survives within `reply_max_error` (action units), else float32.
    reply_dtype: str = "float32"
    reply_max_error: float = 0.0
    # True: the robot accepts robot-space-only chunks when the session runs without RTC.
    reply_robot_only: bool = False


@dataclass
class SessionAck:
    ok: bool
    code: str = "ok"  # a codes.Refusal value (kept `str` on the wire: a newer peer may send a code we do not know)
    message: str = ""
    session_id: str = ""
    replica: str = ""
    model: ModelInfo = field(default_factory=ModelInfo)
    action_names: list[str] = field(default_factory=list)
    chunk_size: int = 0
    trained_fps: float = 0.0
    supports_rtc: bool = False
    rtc_active: bool = False
    serving_mode: str = ""
    warmed_up: bool = False
    schema_version: int = SCHEMA_VERSION
    warnings: list[str] = field(default_factory=list)
    active_sessions: int = 0
    max_sessions: int = 0
    # True when the robot's action names and order were compared with the policy's; False when only the
    # action dimension could be checked (the policy names no actions). Additive: old servers omit it.
    action_names_checked: bool = False
    # Additive. Each camera's trained input size {feature key: [height, width]}: a robot may
    # resize to it before encoding (the server then skips its own resize).
    image_sizes: dict[str, list[int]] = field(default_factory=dict)
    # The reply the server will send: "float16" (chunks within SessionOpen.reply_max_error go as float16,
    # the others float32) or "float32"; `reply_model_space` false = `chunk_model` left out.
    reply_dtype: str = "float32"
    reply_model_space: bool = True
    # Zenoh ids this replica reaches over shared memory: its own session and the routers it is linked to by
    # shared memory (same host). A robot linked by shared memory to one of them sends raw frames.
    # Additive: old servers omit it (the robot then encodes as configured).
    shm_zids: list[str] = field(default_factory=list)
    # Where a robot on this replica's host (see shm_zids) may dial it straight, skipping the router: loopback
    # endpoints, offered only without TLS (server/direct.py). Additive: old servers omit it (the router path).
    direct_endpoints: list[str] = field(default_factory=list)


@dataclass
class SessionInfo:
    session_id: str
    client_uuid: str
    episode_id: int = 0
    requests: int = 0
    superseded: int = 0
    errors: int = 0
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class ServerStatus:
    replica: str
    model: ModelInfo = field(default_factory=ModelInfo)
    service: str = ""
    default_task: str = ""
    pin_task: bool = False
    serving_mode: str = ""
    max_sessions: int = 0
    active_sessions: int = 0
    load: float = 0.0
    supports_rtc: bool = False
    chunk_size: int = 0
    trained_fps: float = 0.0
    inference_ms_p50: float = 0.0
    action_names: list[str] = field(default_factory=list)
    image_features: list[str] = field(default_factory=list)
    state_dim: int = 0
    schema_min: int = SCHEMA_MIN
    schema_max: int = SCHEMA_MAX
    metrics_url: str = ""
    draining: bool = False
    warmed_up: bool = False
    sessions: list[SessionInfo] = field(default_factory=list)
    # Batching (additive): inference_ms_p50 is one forward pass, which serves batch_size_mean robots.
    max_batch: int = 1  # robots per forward pass this replica allows (1: unbatched)
    batch_size_mean: float = 0.0  # mean robots per pass over the recent passes (0: none yet)
    chunks_per_s: float = 0.0  # measured capacity: chunks per second of model time at those batch sizes (0: unknown)
    # Requests this replica served per second over its last 10 s (additive; None: an older server that does not
    # say). The one request rate the console, `lerobot-fleet status` and `doctor` read (their capacity module).
    requests_per_s: float | None = None
    # An operator cordoned this replica: it admits no new sessions (refusal `cordoned`), its sessions keep streaming.
    cordoned: bool = False
    # Which pass serves (additive): "compiled" (a compiled graph per batch bucket) or "eager"; "": an older server.
    engine: str = ""


@dataclass
class ResetRequest:
    session_id: str
    episode_id: int


@dataclass
class ResetAck:
    ok: bool
    episode_id: int = 0
    message: str = ""


@dataclass
class DrainRequest:
    reason: str = ""
    requested_by: str = ""


@dataclass
class DrainAck:
    ok: bool
    message: str = ""
    sessions: list[str] = field(default_factory=list)
    pending: int = 0


@dataclass
class CordonRequest:
    """Operator -> replica: stop (`cordon=True`) or resume (`cordon=False`) admitting new sessions."""

    cordon: bool = True
    reason: str = ""
    requested_by: str = ""


@dataclass
class CordonAck:
    ok: bool
    cordoned: bool = False  # the replica's state after the request
    message: str = ""
    sessions: list[str] = field(default_factory=list)  # the sessions that keep streaming on it


@dataclass
class EpisodeResetCommand:
    """Operator -> robot: start a new episode at the next safe point."""

    reason: str = ""
    requested_by: str = ""


@dataclass
class EpisodeResetAck:
    ok: bool
    message: str = ""
    episode_id: int = 0


@dataclass
class EventMsg:
    """Server -> robot on the action key: anything that is not a chunk."""

    event: str  # a codes.EventKind value: unknown_session | bad_request | draining | error
    message: str = ""
    session_id: str = ""
    seq_id: int = 0


@dataclass
class RobotTelemetry:
    client_uuid: str
    state: str
    model_id: str = ""
    service: str = ""
    session_id: str = ""
    replica: str = ""
    episode_id: int = 0
    staleness_s: float = 0.0
    queue_s: float = 0.0
    rtt_p50_ms: float = 0.0
    rtt_p95_ms: float = 0.0
    delay_steps: int = 0
    fallback_count: int = 0
    requests: int = 0
    superseded: int = 0
    errors: int = 0
    last_outcome: str = ""
    state_age_s: float = 0.0
    fps: float = 0.0
    seq: int = 0
    # Additive: the split of the round trip, medians over the recent chunks (server-reported
    # queue wait and inference; network = RTT - queue wait - inference), and whether the server checked
    # this robot's action order ("checked" | "unchecked" | "" before a session).
    queue_wait_ms_p50: float = 0.0
    inference_ms_p50: float = 0.0
    network_ms_p50: float = 0.0
    action_order: str = ""
    # Additive: the robot's own hard bound on action age (`max_action_age_s`; 0 = not reported,
    # an older robot). The console derives its staleness alert threshold from it.
    max_action_age_s: float = 0.0
    # Additive: whether the robot's current session runs real-time chunking ("on": the server offered RTC and the
    # robot wants it, "off": chunks are appended, "" before a session or from an older robot). With "on",
    # `delay_steps` is the inference delay the robot sends with each request.
    rtc: str = ""
    # Additive: which model this robot runs now (its namespace's revision and the pinned checkpoint fingerprint) and
    # how many times an operator's rollout moved it to another model since it started ("" / 0 from an older robot).
    revision: str = ""
    fingerprint: str = ""
    moves: int = 0


@dataclass
class AuditLine:
    """One line per inference request; JSON on the audit logger and on Zenoh."""

    ts: str
    session_id: str
    client_uuid: str
    seq_id: int
    episode_id: int
    queue_wait_ms: float
    inference_ms: float
    chunk_range: list[int] = field(default_factory=list)
    superseded: int = 0
    outcome: str = "ok"
    replica: str = ""
    error: str = ""
