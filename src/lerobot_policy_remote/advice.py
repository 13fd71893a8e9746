"""What to do about each session refusal, in the words of someone starting a rollout.

Shared by the robot (`lerobot-rollout --inference.type=remote`) and `lerobot-fleet doctor`, so both say
the same thing for the same refusal. Torch-free.
"""

from __future__ import annotations

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
