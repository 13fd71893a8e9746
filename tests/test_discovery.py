"""Service listing and closest-match logic (pure: statuses built by hand, no network)."""

from __future__ import annotations

from lerobot_policy_remote.advice import closest, fix_for, no_server_report
from lerobot_policy_remote.discovery import group
from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import ModelInfo, ServerStatus


def st(replica: str, model: str, task: str, active: int = 0, cap: int = 4, draining: bool = False, warm: bool = True):
    status = ServerStatus(
        replica=replica,
        model=ModelInfo(repo_or_path=model, revision="main", policy_type="act"),
        service=task,
        default_task=task,
        max_sessions=cap,
        active_sessions=active,
        draining=draining,
        warmed_up=warm,
    )
    return status, Namespace(model, "main", task)


def test_group_merges_replicas_of_one_namespace_and_counts_free_sessions():
    services = group(
        [
            st("a", "org/act", "pick up the cube", active=1),
            st("b", "org/act", "pick up the cube", active=4),
            st("c", "org/act", "stack", draining=True),
            st("a", "org/act", "pick up the cube", active=1),
        ]
    )
    assert [(s.service, [r.replica for r in s.replicas]) for s in services] == [
        ("pick up the cube", ["a", "b"]),
        ("stack", ["c"]),
    ]
    cube, stack = services
    assert cube.free_sessions == 3 and [r.health for r in cube.replicas] == ["ok", "full"]
    assert stack.free_sessions == 0 and stack.replicas[0].health == "draining"
    assert cube.describe() == "model 'org/act' revision 'main' task 'pick up the cube': 2 replicas, 3 free sessions"


def test_closest_match_finds_the_one_letter_task_typo():
    services = group(
        [st("a", "org/act", "pick up the cube"), st("b", "org/act", "open the drawer"), st("c", "org/other", "stack")]
    )
    match = closest(services, "org/act", "main", "pick up the cub")
    assert match is not None and (match.model_id, match.service) == ("org/act", "pick up the cube")
    # a model id typed differently (relative path, other org) for the same policy type finds the service
    match = closest(services, "act", "main", "pick up the cube", "act")
    assert match is not None and match.service == "pick up the cube"
    assert fix_for(match, "act", "main", "pick up the cube") == "--inference.service_model_id='org/act'"
    match = closest(services, "org/act", "main", "pick up the cub")
    assert (
        fix_for(match, "org/act", "main", "pick up the cub")
        == "--task='pick up the cube' (or --inference.service_task='pick up the cube')"
    )


def test_nothing_close_is_not_forced():
    services = group([st("a", "org/act", "open the drawer")])
    assert closest(services, "someone/diffusion", "v2", "fold the towel") is None
    text = no_server_report(services, "someone/diffusion", "v2", "fold the towel")
    assert "None is close" in text and "open the drawer" in text


def test_no_server_report_lists_services_and_points_at_the_closest():
    services = group([st("a", "/ckpt/act", "pick up the cube", active=1), st("b", "/ckpt/act", "open the drawer")])
    text = no_server_report(services, "/ckpt/act", "main", "pick up the cub")
    assert text.splitlines() == [
        (
            "No policy server serves model '/ckpt/act' revision 'main' task 'pick up the cub'. "
            "The router offers 2 services:"
        ),
        "  - model '/ckpt/act' revision 'main' task 'open the drawer': 1 replica, 4 free sessions",
        "  - model '/ckpt/act' revision 'main' task 'pick up the cube': 1 replica, 3 free sessions",
        "Closest match: model '/ckpt/act' revision 'main' task 'pick up the cube': 1 replica, 3 free sessions. "
        "To use it: --task='pick up the cube' (or --inference.service_task='pick up the cube')",
    ]


def test_empty_router_says_to_start_a_server():
    assert "the router has no policy server at all" in no_server_report([], "m", "main", "t")


def test_a_robot_whose_model_nothing_serves_is_not_pointed_at_another_models_server():
    """Same task, another model: a diffusion robot is never told to dial an ACT server (its chunks would drive the
    arm with another policy's actions), and a robot whose policy type is unknown only matches its own model id."""
    services = group([st("a", "/ckpt/act", "pick up the cube")])
    assert closest(services, "/ckpt/diffusion", "main", "pick up the cube", "diffusion") is None
    assert closest(services, "/ckpt/diffusion", "main", "pick up the cube") is None
    text = no_server_report(services, "/ckpt/diffusion", "main", "pick up the cube", "diffusion")
    assert "service_model_id" not in text and "None is close" in text
    assert "lerobot-policy-server --model.repo_or_path=/ckpt/diffusion --default_task='pick up the cube'" in text
    # the same policy type under another path may be the same checkpoint: offered, and said so
    text = no_server_report(services, "/data/act", "main", "pick up the cube", "act")
    assert "If it runs your checkpoint: --inference.service_model_id='/ckpt/act'" in text
