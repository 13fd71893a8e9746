"""Real-time chunking with the VLA families (tiny SmolVLA, pi0, pi0.5 built offline, random weights).

Served chunks must equal what lerobot's own local RTC path (`lerobot.rollout.inference.rtc`: preprocess,
`_normalize_prev_actions_length`, `predict_action_chunk(inference_delay=, prev_chunk_left_over=)`,
postprocess) computes for the same observation, prefix, delay and noise. Tolerance: PARITY_ATOL in robot space
(actions of magnitude ~10-100 here). Both paths run the same float32 operations on the CPU; what can differ is
the order of floating-point reductions (our guidance takes one vector-Jacobian product for the batch), measured
at <= 5e-7 in model space. A chunk computed without guidance is >= 0.1 away, so a path that skipped the
guidance, or could not run it, fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lerobot_policy_remote.server.backend import LerobotBackend
from lerobot_policy_remote.server.capabilities import StartupRefusal
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.testing import tiny_pi
from lerobot_policy_remote.testing.vla import SAVERS, VLA_CAMERA, with_prefix
from lerobot_policy_remote.testing.vla import wire_observation as observation
from lerobot_policy_remote.wire.data import ObservationMsg
from lerobot_policy_remote.wire.messages import RtcSettings

PARITY_ATOL = 1e-4
CAM = f"observation.images.{VLA_CAMERA}"
TASK = "pick up the cube"
FAMILIES = ["smolvla", "pi0", "pi05"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tiny_pi.install()
    return {kind: SAVERS[kind](tmp_path_factory.mktemp(kind)) for kind in FAMILIES}


def backend_for(path: Path, **rtc: object) -> LerobotBackend:
    manifest = Manifest(model=ModelSpec(repo_or_path=str(path)), default_task=TASK, health_port=0)
    manifest.rtc.enabled = True
    for key, value in rtc.items():
        setattr(manifest.rtc, key, value)
    return LerobotBackend(manifest, progress=lambda _text: None)


def lerobot_local_rtc(
    path: Path, obs: ObservationMsg, prefix: np.ndarray, delay: int, horizon: int, seed: int
) -> np.ndarray:
    """lerobot's own local RTC inference (the body of `RTCInferenceEngine._rtc_loop`), robot-space chunk."""
    from lerobot.configs import RTCAttentionSchedule
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    from lerobot.policies.rtc.configuration_rtc import RTCConfig
    from lerobot.policies.utils import prepare_observation_for_inference
    from lerobot.rollout.inference.rtc import _normalize_prev_actions_length

    cfg = PreTrainedConfig.from_pretrained(path)
    cfg.rtc_config = RTCConfig(
        enabled=True,
        execution_horizon=horizon,
        max_guidance_weight=10.0,
        prefix_attention_schedule=RTCAttentionSchedule.LINEAR,
    )
    policy = get_policy_class(cfg.type).from_pretrained(path, config=cfg)
    policy.init_rtc_processor()
    policy.eval()
    pre, post = make_pre_post_processors(cfg, pretrained_path=str(path))
    frame = {"observation.state": np.array(obs.state["observation.state"]), CAM: np.array(obs.images[CAM])}
    batch = prepare_observation_for_inference(frame, torch.device("cpu"), TASK, "")
    batch["task"] = [TASK]
    prev = _normalize_prev_actions_length(torch.from_numpy(prefix.astype(np.float32)), target_steps=horizon)
    torch.manual_seed(seed)
    actions = policy.predict_action_chunk(pre(batch), inference_delay=delay, prev_chunk_left_over=prev)
    return post(actions).squeeze(0).float().numpy()


@pytest.mark.parametrize("kind", FAMILIES)
def test_a_served_rtc_chunk_equals_lerobots_local_rtc_chunk(checkpoints, kind):
    backend = backend_for(checkpoints[kind], execution_horizon=8)
    state = backend.new_session_state()
    first, _ = backend.infer(state, observation(backend, 1), None)
    prefix, delay, horizon = first[4:], 3, 8
    torch.manual_seed(11)
    served = backend.infer(state, with_prefix(observation(backend, 2), prefix, delay), RtcSettings(True, horizon))[1]
    local = lerobot_local_rtc(checkpoints[kind], observation(backend, 2), prefix, delay, horizon, 11)
    np.testing.assert_allclose(served, local, atol=PARITY_ATOL, rtol=0)
    torch.manual_seed(11)
    unguided = backend.infer(state, observation(backend, 2), None)[1]
    assert np.abs(unguided - local).max() > 0.1  # the guidance changed the chunk: parity is not trivial


@pytest.mark.parametrize("kind", ["smolvla", "pi0"])
def test_the_guidance_pulls_the_chunk_onto_the_prefix(checkpoints, kind):
    backend = backend_for(checkpoints[kind])
    state = backend.new_session_state()
    first, _ = backend.infer(state, observation(backend, 3), None)
    prefix = first[2:] + 3.0  # far from what the model would do on its own
    torch.manual_seed(5)
    guided = backend.infer(state, with_prefix(observation(backend, 4), prefix, 2), RtcSettings(True, 10))[0]
    torch.manual_seed(5)
    free = backend.infer(state, observation(backend, 4), None)[0]
    near = np.abs(guided[:5] - prefix[:5]).mean()
    assert near < 0.5 * np.abs(free[:5] - prefix[:5]).mean()


@pytest.mark.parametrize("kind", FAMILIES)
def test_robots_with_rtc_batch_together_and_each_gets_its_own_chunk(checkpoints, kind):
    backend = backend_for(checkpoints[kind])
    base, _ = backend.infer(backend.new_session_state(), observation(backend, 6), None)
    requests = [  # each robot its own delay, prefix, horizon, guidance weight, schedule; one robot without RTC
        (with_prefix(observation(backend, 7), base[3:], 1), RtcSettings(True, 10)),
        (observation(backend, 8), None),
        (with_prefix(observation(backend, 9), base[5:] - 2.0, 4), RtcSettings(True, 6, 5.0, "EXP")),
        (with_prefix(observation(backend, 10), base[1:], 0), RtcSettings(True, 3, 10.0, "ZEROS")),
    ]
    states = [backend.new_session_state() for _ in requests]
    assert all(backend.can_batch(s, o, r) for s, (o, r) in zip(states, requests, strict=True))
    torch.manual_seed(21)
    alone = [backend.infer(s, o, r) for s, (o, r) in zip(states, requests, strict=True)]
    torch.manual_seed(21)
    together = backend.infer_batch([(s, o, r) for s, (o, r) in zip(states, requests, strict=True)])
    for (m1, r1), (m2, r2) in zip(alone, together, strict=True):
        np.testing.assert_allclose(m2, m1, atol=1e-5, rtol=0)
        np.testing.assert_allclose(r2, r1, atol=PARITY_ATOL, rtol=0)
    assert np.abs(together[0][0] - together[2][0]).max() > 0.1  # different prefixes, different chunks


def test_warm_up_runs_a_guided_pass_and_refuses_a_policy_whose_rtc_cannot_run(checkpoints, monkeypatch):
    backend = backend_for(checkpoints["smolvla"])
    lines: list[str] = []
    backend.warmup(1, lines.append)
    assert any(line.startswith("Warm-up RTC pass with a prefix") for line in lines)

    guidance = backend.guidance
    plain_step = guidance.denoise_step

    def broken(*args: object, **kwargs: object) -> object:
        """The failure an inference path without autograd gives, on guided passes only."""
        if any(row.prefix is not None for row in guidance._plan or []):  # noqa: SLF001
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        return plain_step(*args, **kwargs)

    monkeypatch.setattr(guidance, "denoise_step", broken)
    with pytest.raises(StartupRefusal) as refused:
        backend.warmup(1, lambda _text: None)
    text = str(refused.value)
    assert "\n" not in text and "real-time chunking cannot run" in text and "--rtc.enabled=false" in text


def test_lerobots_own_guidance_fails_under_inference_mode_and_ours_does_not(checkpoints):
    """Why the server replaces lerobot's RTC processor: its step takes a gradient, which inference tensors refuse
    (every request with a prefix failed); ours computes the same correction without a graph."""
    from lerobot.policies.rtc.modeling_rtc import RTCProcessor

    backend = backend_for(checkpoints["pi0"])
    state = backend.new_session_state()
    first, _ = backend.infer(state, observation(backend, 12), None)
    obs = with_prefix(observation(backend, 13), first[2:], 1)
    with torch.inference_mode():
        torch.manual_seed(3)
        ours = backend.infer(state, obs, RtcSettings(True, 10))[1]
    torch.manual_seed(3)
    assert np.abs(backend.infer(state, obs, RtcSettings(True, 10))[1] - ours).max() == 0
    stock = RTCProcessor(backend.guidance.rtc_config)
    x_t = torch.zeros(1, 4, 2)
    with torch.inference_mode(), pytest.raises(RuntimeError):
        stock.denoise_step(x_t, torch.ones(1, 4, 2), 1, 0.5, lambda x: x * 2.0, 4)


def test_the_server_batches_rtc_robots_in_one_pass(checkpoints, server_factory, robots):
    """Through the real router and worker: four RTC robots, each with its own prefix and delay, share a pass."""
    from lerobot_policy_remote.server.manifest import BatchingSpec
    from lerobot_policy_remote.wire.data import ActionChunkMsg

    server = server_factory(
        str(checkpoints["smolvla"]),
        max_sessions=4,
        rtc=RtcSettings(enabled=True),
        batching=BatchingSpec(max_batch=4, max_wait_ms=1000.0),
    )
    fleet = robots(server, 4)
    for r in fleet:
        ack = r.open(server.replica, rtc=True)
        assert ack.ok and ack.rtc_active
    rng = np.random.default_rng(4)
    for i, r in enumerate(fleet):
        prefix = rng.normal(0, 1, (20, 6)).astype(np.float32)
        r.send(
            rng.normal(0, 20, 6).astype(np.float32),
            image=rng.integers(0, 255, (96, 128, 3), dtype=np.uint8),
            prefix=(prefix, prefix * 10),
            delay=i % 3,
            quality=0,
        )
    chunks = [r.wait_for(lambda h, b: isinstance(b, ActionChunkMsg), 30)[1] for r in fleet]
    assert all(np.isfinite(c.chunk_robot).all() and c.chunk_robot.shape == (30, 6) for c in chunks)
    assert max(b for b, _ in server.worker.stats.recent()) >= 3  # one pass for (nearly) all four: none ran alone
