"""The compiled pass of a tiny SmolVLA (`model.compile=on`, one graph for two robots) against the eager pass: the same
chunk for one robot (padded) and two, RTC on and off. A compile that fails leaves the eager pass serving, with one
WARNING; through the real router and worker, the start line, the status and /metrics say which pass serves."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from compiled_pairs import backend_for, broken_compile, check_parity, checkpoint, compiled_pair

from lerobot_policy_remote.server.backend import LerobotBackend
from lerobot_policy_remote.server.manifest import ModelSpec
from lerobot_policy_remote.testing.vla import wire_observation as observation

# the bucket compiles for about a minute on a 2-core CPU; a cold cache on a busy box takes several
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def smolvla(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkpoint("smolvla", tmp_path_factory.mktemp("smolvla"))


@pytest.fixture(scope="module")
def pair(smolvla: Path) -> tuple[LerobotBackend, LerobotBackend]:
    return compiled_pair(smolvla, [2])


@pytest.mark.parametrize("rtc", [False, True], ids=["plain", "rtc"])
def test_the_compiled_chunk_equals_the_eager_chunk_alone_and_in_a_padded_bucket(pair, rtc):
    check_parity(*pair, rtc)


def test_a_compile_that_fails_serves_eagerly_with_one_warning(smolvla, monkeypatch, caplog):
    monkeypatch.setattr(torch, "compile", broken_compile)
    backend = backend_for(smolvla, "on", [2])
    lines: list[str] = []
    with caplog.at_level(logging.WARNING, logger="lerobot.policy_server"):
        backend.compile_engine(2, lines.append)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "serving eagerly" in warnings[0].getMessage()
    assert "\n" not in warnings[0].getMessage()
    assert backend.engine.path == "eager" and "forced" in backend.engine.reason
    assert backend.policy.model.sample_actions.__self__ is backend.policy.model  # lerobot's own method again
    model_chunk, robot_chunk = backend.infer(backend.new_session_state(), observation(backend, 2), None)
    assert np.isfinite(robot_chunk).all() and model_chunk.shape[0] == backend.caps.chunk_size


def _metric(server, name: str, **labels: str) -> float:
    return server.metrics.value(name, **labels)


@pytest.mark.parametrize("broken", [False, True], ids=["compiled", "compile-fails"])
def test_the_server_says_which_pass_serves_in_its_status_and_metrics(
    smolvla, server_factory, robots, monkeypatch, caplog, broken
):
    """Through the real router and worker: the start line, the status and /metrics name the path; a forced compile
    failure still starts the server, which serves eagerly after one WARNING."""
    from lerobot_policy_remote.server.manifest import BatchingSpec
    from lerobot_policy_remote.wire.data import ActionChunkMsg

    if broken:
        monkeypatch.setattr(torch, "compile", broken_compile)
    with caplog.at_level(logging.WARNING, logger="lerobot.policy_server"):
        server = server_factory(
            str(smolvla),
            model=ModelSpec(repo_or_path=str(smolvla), compile="on", compile_buckets=[2]),
            batching=BatchingSpec(max_batch=2),
        )
    want = "eager" if broken else "compiled"
    assert server.status().engine == want
    assert _metric(server, "engine", path=want) == 1.0
    compiles = _metric(server, "engine_compiles_total")  # this process may have compiled these regions before
    if broken:
        assert compiles == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "compil" in r.getMessage()]
    assert len(warnings) == (1 if broken else 0), warnings
    robot = robots(server, 1)[0]
    assert robot.open(server.replica).ok
    rng = np.random.default_rng(3)
    robot.send(rng.normal(0, 20, 6).astype(np.float32), image=rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
    chunk = robot.wait_for(lambda h, b: isinstance(b, ActionChunkMsg), 30)[1]
    assert np.isfinite(chunk.chunk_robot).all()
    assert _metric(server, "engine_graph_replays_total") == (0 if broken else 3)  # warm-up's 2 passes + this one
    assert _metric(server, "engine_eager_fallbacks_total") == 0
    assert _metric(server, "engine_compiles_total") == compiles  # serving compiled nothing
