"""What to do about each session refusal, in the words of someone starting a rollout: the contract refusals, and
a request nothing serves (what the router offers, the closest service, the flags to reach it).

Shared by the robot (`lerobot-rollout --inference.type=remote`) and `lerobot-fleet doctor`, so both say
the same thing for the same refusal. Torch-free.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Sequence

from .discovery import Scope, ServiceInfo, namespace_flag
from .wire.codes import Refusal

CONTRACT_ADVICE: dict[Refusal, str] = {
    Refusal.ACTION_MISMATCH: (
        "run the robot type the policy was trained on (same joints, same order), or serve a policy "
        "trained for this robot; if only the order differs, set action_feature_names in the server "
        "manifest to the training dataset's action names"
    ),
    Refusal.CAMERA_MISMATCH: (
        "give the robot the cameras the policy was trained with (same names), or map them with "
        '--rename_map=\'{"observation.images.<robot cam>": "observation.images.<policy cam>"}\''
    ),
    Refusal.ACTION_ORDER_UNCHECKED: (
        "the server refuses robots whose action order it cannot check (strict_action_names): "
        "set action_feature_names in the server manifest to the training dataset's action names "
        "(meta/info.json features.action.names, in order)"
    ),
    Refusal.STATE_DIM_MISMATCH: "run the robot type the policy was trained on: its joint state has a different size",
    Refusal.FPS_MISMATCH: (
        "run the rollout at the policy's training fps (--fps), or start the server with strict_fps=false"
    ),
    Refusal.TASK_MISMATCH: "use the server's task (--task), or run a server for this task (the server pins its task)",
    Refusal.MODEL_MISMATCH: (
        "--policy.path must name the same policy type the server runs; after a server model change, "
        "restart the rollout to accept the new model"
    ),
    Refusal.SCHEMA_MISMATCH: "upgrade lerobot_policy_remote on the robot and the server to compatible versions",
    Refusal.BAD_REQUEST: "upgrade lerobot_policy_remote on the robot and the server to the same version",
    Refusal.SERVER_FULL: (
        "wait for a free session, start another replica of this server, or raise max_sessions in the "
        "server manifest if the hardware has room"
    ),
    Refusal.DRAINING: "the replica is shutting down: wait for another replica or restart the server",
    Refusal.CORDONED: (
        "an operator cordoned the replica (it admits no new sessions): use another replica of this "
        "service, or `lerobot-fleet uncordon REPLICA` with an operator certificate"
    ),
}


def contract_advice(code: Refusal | str) -> str:
    """What to do about refusal `code` (a plain-string code from the wire works too); "" when nothing to say."""
    try:
        return CONTRACT_ADVICE.get(Refusal(code), "")
    except ValueError:  # a code this version does not know
        return ""


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.strip().lower(), b.strip().lower()).ratio()


def closest(
    services: list[ServiceInfo], model_id: str, revision: str, task: str, policy_type: str = ""
) -> ServiceInfo | None:
    """The service whose (task, model, revision) is most similar to the request; None if nothing is close.

    The task weighs most: it is free text typed per rollout, the usual source of a one-letter miss. A service of
    another model id is a match only when it serves the robot's own policy type (the same checkpoint named by
    another path): a robot is never pointed at another model's server.
    """
    best, best_score = None, 0.0
    for svc in services:
        if svc.model_id != model_id and not (policy_type and svc.policy_type == policy_type):
            continue
        score = 2.0 * _ratio(task, svc.service) + _ratio(model_id, svc.model_id) + 0.5 * (revision == svc.revision)
        if score > best_score:
            best, best_score = svc, score
    return best if best_score >= 1.5 else None


def fix_for(match: ServiceInfo, model_id: str, revision: str, task: str) -> str:
    """The flags that would make the request land on `match` (robot-side names)."""
    fixes = []
    if match.service != task:
        fixes.append(f"--task={match.service!r} (or --inference.service_task={match.service!r})")
    if match.model_id != model_id:
        fixes.append(f"--inference.service_model_id={match.model_id!r}")
    if match.revision != revision:
        fixes.append(f"--inference.service_revision={match.revision!r}")
    return " ".join(fixes)


def no_server_report(
    services: list[ServiceInfo], model_id: str, revision: str, task: str, policy_type: str = ""
) -> str:
    """Why nothing answered, what the router does offer, and the closest match with the flags to reach it."""
    asked = f"model {model_id!r} revision {revision!r} task {task!r}"
    if not services:
        return (
            f"No policy server serves {asked}, and the router has no policy server at all. Start one connected to "
            "this router: lerobot-policy-server --model.repo_or_path=<checkpoint> --default_task=<task> "
            "--zenoh.connect_endpoints=[<router endpoint>]"
        )
    lines = [
        f"No policy server serves {asked}. "
        f"The router offers {len(services)} service{'s' if len(services) != 1 else ''}:"
    ]
    lines += [f"  - {svc.describe()}" for svc in services]
    match = closest(services, model_id, revision, task, policy_type)
    if match is not None and match.model_id != model_id:
        lines.append(
            f"Closest match: {match.describe()}, a {match.policy_type} policy like yours under another model id. "
            f"If it runs your checkpoint: {fix_for(match, model_id, revision, task)}; else start a server for yours"
        )
    elif match is not None:
        lines.append(f"Closest match: {match.describe()}. To use it: {fix_for(match, model_id, revision, task)}")
    else:
        lines.append(
            f"None is close to what you asked: start a server for it (lerobot-policy-server "
            f"--model.repo_or_path={model_id} --default_task={task!r}), or pick one of the above for this model "
            "(--task, --inference.service_revision)."
        )
    return "\n".join(lines)


def scoped_report(
    services: list[ServiceInfo],
    model_id: str,
    revision: str,
    task: str,
    cn: str,
    scopes: Sequence[Scope],
    source: str = "certificate",
    policy_type: str = "",
) -> str:
    """Under mTLS, for a certificate bound to some namespaces: the router answers it only there, so `services` are
    all it can see. One line: what it asked, the namespaces it may see and what serves there, and the fix
    (`--task=...` for a visible service, else the `pki issue` command for a certificate in the namespace asked for)."""
    asked = f"model {model_id!r} revision {revision!r} task {task!r}"
    inside = any(s.covers(model_id, revision, task) for s in scopes)
    plural = "s" if len(scopes) != 1 else ""
    where = "" if source == "certificate" else f" (as {source} records it)"
    text = (
        f"No policy server serves {asked} among what certificate CN={cn} may see: the router's access control "
        f"answers it only in namespace{plural} {', '.join(repr(s.flag()) for s in scopes)}{where}"
    )
    text += "" if inside else ", and this request is outside them"
    wanted = [s.flag() for s in scopes if s.flag() != namespace_flag(model_id, revision, task)]
    wanted.append(namespace_flag(model_id, revision, task))
    flags = " ".join(f"--namespace {shlex.quote(f)}" for f in wanted)
    pki = (
        f"lerobot-fleet pki issue DIR {cn} --role robot {flags}, then restart the router with the updated "
        "DIR/inventory.yaml"
    )
    if services:
        n = len(services)
        text += f". There it sees {n} service{'s' if n != 1 else ''}: " + "; ".join(svc.describe() for svc in services)
        match = closest(services, model_id, revision, task, policy_type)
        if match is None and n == 1 and services[0].model_id == model_id:
            match = services[0]
        fix = (
            f"To use it: {fix_for(match, model_id, revision, task)}"
            if match is not None
            else "To use one serving this model: pass its --task (or --inference.service_revision)"
        )
        if inside:
            return f"{text}. {fix}; or start a server for what you asked"
        return f"{text}. {fix}; or, to be served what you asked, give the robot a certificate for it: {pki}"
    if inside:
        here = shlex.quote(namespace_flag(model_id, revision, task))
        return (
            f"{text}, where no server serves now. Start one there (its certificate needs that namespace: "
            f"lerobot-fleet pki issue DIR NAME --role server --namespace {here}); if one runs, the router's "
            f"inventory may not grant CN={cn} this namespace (it logs 'ACL refused: CN={cn} ...')"
        )
    return f"{text}. No server serves there; for a certificate in the namespace asked for: {pki}"
