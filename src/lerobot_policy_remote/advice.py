"""What to do about each session refusal, in the words of someone starting a rollout.

Shared by the robot (`lerobot-rollout --inference.type=remote`) and `lerobot-fleet doctor`, so both say
the same thing for the same refusal. Torch-free.
"""

from __future__ import annotations

CONTRACT_ADVICE: dict[str, str] = {
    "action_mismatch": ("run the robot type the policy was trained on (same joints, same order), or serve a policy "
                        "trained for this robot; if only the order differs, set action_feature_names in the server "
                        "manifest to the training dataset's action names"),
    "camera_mismatch": ("give the robot the cameras the policy was trained with (same names), or map them with "
                        "--rename_map='{\"observation.images.<robot cam>\": \"observation.images.<policy cam>\"}'"),
    "state_dim_mismatch": "run the robot type the policy was trained on: its joint state has a different size",
    "fps_mismatch": "run the rollout at the policy's training fps (--fps), or start the server with strict_fps=false",
    "task_mismatch": "use the server's task (--task), or run a server for this task (the server pins its task)",
    "model_mismatch": ("--policy.path must name the same policy type the server runs; after a server model change, "
                       "restart the rollout to accept the new model"),
    "schema_mismatch": "upgrade lerobot_policy_remote on the robot and the server to compatible versions",
    "bad_request": "upgrade lerobot_policy_remote on the robot and the server to the same version",
    "server_full": ("wait for a free session, start another replica of this server, or raise max_sessions in the "
                    "server manifest if the hardware has room"),
    "draining": "the replica is shutting down: wait for another replica or restart the server",
}


def contract_advice(code: str) -> str:
    return CONTRACT_ADVICE.get(code, "")
