"""What the loaded policy can serve, and the session-open check matrix.

Why a registry and not introspection: whether `predict_action_chunk` touches instance state is a
property of each policy family's code, verified by reading it; anything not verified is served
exclusively (one robot), which is always safe.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..wire.codes import Refusal
from ..wire.errors import SchemaVersionError
from ..wire.messages import SCHEMA_MAX, SCHEMA_MIN, SessionOpen, negotiate_schema

# predict_action_chunk is pure w.r.t. instance state (queues/ensemblers live in select_action).
CHUNK_STATELESS = frozenset({"act", "pi0", "pi05"})
# predict_action_chunk reads observation queues filled by select_action: exclusive, fed via select_action.
QUEUE_FED = frozenset({"diffusion"})
# No chunk API at all.
NO_CHUNK_API = frozenset({"sac", "sarm", "reward_classifier"})


ACTION_ORDER_UNCHECKED = Refusal.ACTION_ORDER_UNCHECKED  # strict_action_names and no names known


class StartupRefusal(RuntimeError):
    """The policy cannot be served by this server; the message says why and what to do instead."""


@dataclass
class Classification:
    policy_type: str
    serving_mode: str  # shared | exclusive
    reason: str
    queue_fed: bool = False


def classify(policy: Any, policy_type: str, requested: str) -> Classification:
    """Serving class of a loaded policy; `requested` is the manifest serving_mode (auto|exclusive|shared)."""
    from lerobot.policies.pretrained import PreTrainedPolicy

    impl = getattr(type(policy), "predict_action_chunk", None)
    if policy_type in NO_CHUNK_API or impl is None or impl is PreTrainedPolicy.predict_action_chunk:
        raise StartupRefusal(
            f"policy type {policy_type!r} has no predict_action_chunk (it produces single actions, not chunks): "
            "it cannot be served remotely; run it locally with lerobot-rollout instead"
        )
    if policy_type in QUEUE_FED:
        mode, reason, queue_fed = (
            "exclusive",
            f"{policy_type}: predict_action_chunk reads observation queues fed by select_action (stateful)",
            True,
        )
    elif policy_type in CHUNK_STATELESS:
        mode, reason, queue_fed = "shared", f"{policy_type}: verified chunk-stateless", False
    elif getattr(type(policy), "supports_stateless_chunking", False) is True:
        # Opt-in by the policy's author (a class attribute proposed for PreTrainedPolicy), e.g. plugin policies.
        mode, reason, queue_fed = "shared", f"{policy_type}: declares supports_stateless_chunking", False
    elif policy_type == "smolvla":
        n_obs = int(getattr(policy.config, "n_obs_steps", 1))
        if n_obs == 1:
            mode, reason, queue_fed = "shared", "smolvla with n_obs_steps=1: chunk-stateless", False
        else:
            mode, reason, queue_fed = "exclusive", f"smolvla with n_obs_steps={n_obs} keeps observation history", False
    else:
        mode, reason, queue_fed = (
            "exclusive",
            f"{policy_type}: not verified chunk-stateless, served to one robot at a time",
            False,
        )
    if requested == "exclusive" and mode == "shared":
        mode, reason = "exclusive", reason + "; forced exclusive by the manifest"
    return Classification(policy_type, mode, reason, queue_fed)


@dataclass
class Capabilities:
    """Everything session validation needs, fixed at startup."""

    policy_type: str
    action_dim: int
    action_names: list[str]  # empty when the policy/manifest does not name its actions
    image_keys: list[str]
    image_shapes: dict[str, tuple[int, ...]]
    state_dim: int
    state_key: str | None
    chunk_size: int
    trained_fps: float
    strict_fps: bool
    fps_tolerance: float
    default_task: str
    pin_task: bool
    supports_rtc: bool
    serving_mode: str
    max_sessions: int
    fingerprint: str
    names_warning: str = ""
    schema_min: int = SCHEMA_MIN
    schema_max: int = SCHEMA_MAX
    strict_action_names: bool = False  # refuse robots whose action order cannot be checked
    serving_reason: str = ""  # why this policy is served shared or exclusive (said in an exclusive server's refusal)


@dataclass
class OpenVerdict:
    ok: bool
    code: Refusal = Refusal.OK
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    rtc_active: bool = False
    schema_version: int = SCHEMA_MAX
    names_checked: bool = False  # the robot's action names and order were compared with the policy's


def dataset_action_names(checkpoint_dir: str | Path | None) -> tuple[list[str], str]:
    """`features.action.names` of a dataset `meta/info.json` in the checkpoint directory or its parent: (names, file).

    lerobot datasets write the ordered action names there; a checkpoint shipped with (or inside) its training
    dataset therefore names its actions even when the policy config does not (ACT, diffusion, SmolVLA in 0.6.1).
    """
    if checkpoint_dir is None or not Path(checkpoint_dir).is_dir():
        return [], ""
    root = Path(checkpoint_dir).resolve()
    for info in (root / "meta" / "info.json", root.parent / "meta" / "info.json"):
        if not info.is_file():
            continue
        try:
            names = json.loads(info.read_text())["features"]["action"]["names"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(names, dict) and len(names) == 1:  # older datasets: {"motors": [...]}
            names = next(iter(names.values()))
        if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
            return list(names), str(info)
    return [], ""


def resolve_action_names(
    manifest_names: list[str], config: Any, action_dim: int, checkpoint_dir: str | Path | None = None
) -> tuple[list[str], str, str]:
    """Ordered action names: (names, warning when there are none, where they came from).

    Sources in order: the manifest's `action_feature_names`, the policy config's `action_feature_names`, a
    dataset `meta/info.json` beside the checkpoint. A list whose length differs from the policy's action
    dimension is a startup error naming its source.
    """
    sources = [
        (list(manifest_names), "manifest action_feature_names"),
        (list(getattr(config, "action_feature_names", None) or []), "policy config action_feature_names"),
        dataset_action_names(checkpoint_dir),
    ]
    for names, source in sources:
        if not names:
            continue
        if len(names) != action_dim:
            raise StartupRefusal(
                f"{source} has {len(names)} names but the policy's action feature has dimension {action_dim}: "
                "list exactly one name per action dimension, in the order the policy was trained with"
            )
        return names, "", source
    return (
        [],
        (
            f"action names/order could not be verified: the policy config has no action_feature_names, only the action "
            f"dimension ({action_dim}) was checked; set action_feature_names in the server manifest "
            "(the dataset's action names, in order: meta/info.json features.action.names) to verify the order"
        ),
        "",
    )


def exclusive_full_message(caps: Capabilities, active: int) -> str:
    """An exclusive server's refusal: it serves one robot at a time, and why (not a bare 'server full')."""
    why = caps.serving_reason or f"{caps.policy_type} is not verified chunk-stateless"
    return (
        f"server full: {active}/{caps.max_sessions} sessions active: this server serves one robot at a time "
        f"(exclusive policy: {why}), and another robot holds it. Start one lerobot-policy-server per robot "
        "for this policy, or wait until that robot stops"
    )


def check_open(req: SessionOpen, caps: Capabilities, active: int, draining: bool, same_client: bool) -> OpenVerdict:
    """The session-open check matrix, pure CPU. `same_client`: this client already holds a session (re-open
    replaces it)."""
    if draining:
        return OpenVerdict(False, Refusal.DRAINING, "server is draining: try another replica")
    try:
        version = negotiate_schema(req.schema_min, req.schema_max, caps.schema_min, caps.schema_max)
    except SchemaVersionError as exc:
        return OpenVerdict(False, Refusal.SCHEMA_MISMATCH, f"schema version mismatch: {exc.problem}")
    if req.expect_fingerprint and req.expect_fingerprint != caps.fingerprint:
        return OpenVerdict(
            False,
            Refusal.MODEL_MISMATCH,
            f"this server now runs a different checkpoint (fingerprint {caps.fingerprint[:12]}, the session was opened "
            f"with {req.expect_fingerprint[:12]}): refusing to serve chunks from another model",
        )
    if req.policy_type and req.policy_type != caps.policy_type:
        return OpenVerdict(
            False,
            Refusal.MODEL_MISMATCH,
            f"robot expects policy type {req.policy_type!r}, server runs {caps.policy_type!r}",
        )
    # Action names and order: the sync-safety contract.
    robot_names = list(req.action_names)
    if len(robot_names) != caps.action_dim:
        return OpenVerdict(
            False,
            Refusal.ACTION_MISMATCH,
            f"Action name/order mismatch between server policy and this robot: the policy outputs {caps.action_dim} "
            f"actions, the robot has {len(robot_names)} ({robot_names})",
        )
    warnings: list[str] = []
    if caps.action_names:
        if robot_names != caps.action_names:
            return OpenVerdict(
                False,
                Refusal.ACTION_MISMATCH,
                "Action name/order mismatch between server policy and this robot: "
                f"policy {caps.action_names}, robot {robot_names}. "
                "Use the robot type and rename map the policy was trained with.",
            )
    elif caps.strict_action_names:
        return OpenVerdict(
            False,
            ACTION_ORDER_UNCHECKED,
            "action order cannot be checked and this server has strict_action_names on: the policy names no actions. "
            "Set action_feature_names in the server manifest "
            "(the training dataset's meta/info.json features.action.names, "
            "in order), or put the dataset's meta/info.json beside the checkpoint",
        )
    elif caps.names_warning:
        warnings.append(caps.names_warning)
    # Cameras and state.
    feats = {f.name: f for f in req.features}
    missing = [k for k in caps.image_keys if k not in feats or feats[k].kind != "image"]
    if missing:
        return OpenVerdict(
            False,
            Refusal.CAMERA_MISMATCH,
            f"camera mismatch: the policy needs {caps.image_keys}, the robot does not send {missing} "
            f"(it sends {sorted(k for k, f in feats.items() if f.kind == 'image')}); "
            "fix the camera names or the rename map",
        )
    for key in caps.image_keys:
        shape = list(feats[key].shape)
        want = caps.image_shapes.get(key)
        if len(shape) == 3 and want and len(want) == 3:
            h, w = shape[0], shape[1]
            if h > 0 and w > 0 and not math.isclose(h / w, want[1] / want[2], rel_tol=0.02):
                warnings.append(
                    f"{key}: aspect ratio {w}x{h} differs from training {want[2]}x{want[1]}; images are resized"
                )
    if caps.state_key is not None:
        state = feats.get(caps.state_key)
        dim = math.prod(state.shape) if state is not None and state.shape else 0
        if state is None or dim != caps.state_dim:
            return OpenVerdict(
                False,
                Refusal.STATE_DIM_MISMATCH,
                f"state dimension mismatch: the policy expects {caps.state_key} of size {caps.state_dim}, "
                f"the robot sends {dim if state is not None else 'none'}",
            )
    # Task and fps.
    if caps.pin_task and req.task and req.task != caps.default_task:
        return OpenVerdict(
            False,
            Refusal.TASK_MISMATCH,
            f"this server is pinned to task {caps.default_task!r}; the robot asked for {req.task!r}",
        )
    if req.fps > 0 and abs(req.fps - caps.trained_fps) > caps.fps_tolerance * caps.trained_fps:
        text = f"robot runs at {req.fps:g} fps, the policy was trained at {caps.trained_fps:g} fps"
        if caps.strict_fps:
            return OpenVerdict(False, Refusal.FPS_MISMATCH, text + " (strict_fps is on)")
        warnings.append(text)
    # RTC: downgrade, never reject. Not a warning: expected for a policy without RTC (ACT), and the ack's
    # rtc_active / supports_rtc already say it; the robot logs it at INFO.
    rtc_active = bool(req.rtc.enabled and caps.supports_rtc)
    # Capacity last: a contract mismatch is more useful to report than a full server.
    if not same_client and active >= caps.max_sessions:
        if caps.serving_mode == "exclusive":
            return OpenVerdict(False, Refusal.SERVER_FULL, exclusive_full_message(caps, active))
        return OpenVerdict(False, Refusal.SERVER_FULL, f"server full: {active}/{caps.max_sessions} sessions active")
    return OpenVerdict(True, Refusal.OK, "", warnings, rtc_active, version, names_checked=bool(caps.action_names))
