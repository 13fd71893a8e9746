"""A real diffusion policy: classified exclusive, one robot only, chunks via its observation queues."""

from __future__ import annotations

import numpy as np

from lerobot_policy_remote.server.capabilities import StartupRefusal, classify


def test_diffusion_exclusive_rejects_second_session(server_factory, robots, diffusion_ckpt):
    server = server_factory(diffusion_ckpt, max_sessions=5, serving_mode="shared")  # shared cannot override stateful
    assert server.caps.serving_mode == "exclusive" and server.caps.max_sessions == 1
    a, b = robots(server, 2)
    ack = a.open(server.replica)
    assert ack.ok and ack.serving_mode == "exclusive"
    chunk = a.request(np.zeros(6), timeout=60)
    assert chunk.chunk_robot.shape == (8, 6) and np.isfinite(chunk.chunk_robot).all()
    second = b.open(server.replica)
    assert not second.ok and second.code == "server_full"
    assert "1/1" in second.message
    [st] = [s for s in b.statuses() if s.replica == server.replica]
    assert st.serving_mode == "exclusive" and st.max_sessions == 1


def test_policy_without_chunk_api_is_refused():
    from lerobot.policies.pretrained import PreTrainedPolicy

    class SingleStep:  # inherits the base predict_action_chunk (raises NotImplementedError), like sac
        predict_action_chunk = PreTrainedPolicy.predict_action_chunk

    policy = SingleStep()
    try:
        classify(policy, "single", "auto")
    except StartupRefusal as exc:
        assert "no predict_action_chunk" in str(exc)
    else:
        raise AssertionError("a policy without predict_action_chunk must be refused")
    for name in ("sac", "sarm"):
        try:
            classify(policy, name, "auto")
        except StartupRefusal:
            continue
        raise AssertionError(f"{name} must be refused")


def test_stateless_chunking_is_opt_in_and_never_overrides_stateful():
    class Unverified:
        def predict_action_chunk(self, batch):  # a real chunk API, but nobody vouched for it
            return batch

    class Declared(Unverified):
        supports_stateless_chunking = True

    assert classify(Unverified(), "plugin_policy", "auto").serving_mode == "exclusive"
    assert classify(Declared(), "plugin_policy", "auto").serving_mode == "shared"
    assert classify(Declared(), "plugin_policy", "exclusive").serving_mode == "exclusive"
    # A stateful family stays exclusive even if it claims otherwise.
    assert classify(Declared(), "diffusion", "shared").serving_mode == "exclusive"
