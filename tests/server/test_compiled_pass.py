"""The compiled pass (`model.compile=on`: torch.compile, one graph per batch bucket) against the eager pass.

Tiny SmolVLA, pi0 and pi0.5 built offline, on the CPU (inductor's C++ kernels). For the same observation, prefix,
delay and noise the compiled chunk equals the eager one within COMPILED_ATOL in model space (float32; what differs is
the order of fused floating-point reductions), RTC on and off, for one robot and for a padded bucket, and padding
rows never reach a real row. After warm-up no request compiles: 1,000 mixed requests see 0 new graphs and 0 eager
fallbacks. A compile that fails leaves the eager pass serving, with one WARNING.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from lerobot_policy_remote.server.backend import LerobotBackend
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.testing import tiny_pi
from lerobot_policy_remote.testing.vla import SAVERS, VLA_CAMERA, with_prefix
from lerobot_policy_remote.testing.vla import wire_observation as observation
from lerobot_policy_remote.wire.data import ObservationMsg
from lerobot_policy_remote.wire.messages import RtcSettings

pytestmark = pytest.mark.slow  # each bucket compiles for about a minute on a 2-core CPU

COMPILED_ATOL = 1e-5  # model space, float32 on the CPU (measured <= 4.8e-7)
CAM = f"observation.images.{VLA_CAMERA}"
TASK = "pick up the cube"
# pi0: a graph for one robot and one for up to three (two robots run padded); pi0.5 and SmolVLA: one graph for two
# (one robot runs padded), so every family is checked alone-and-padded at one compile or two.
BUCKETS = {"pi0": [1, 3], "pi05": [2], "smolvla": [2]}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tiny_pi.install()
    return {kind: SAVERS[kind](tmp_path_factory.mktemp(kind)) for kind in BUCKETS}


def backend_for(path: Path, compile_choice: str, buckets: list[int] | None = None) -> LerobotBackend:
    manifest = Manifest(model=ModelSpec(repo_or_path=str(path), compile=compile_choice), default_task=TASK)
    manifest.model.compile_buckets = list(buckets or [])
    return LerobotBackend(manifest, progress=lambda _text: None)


@pytest.fixture(scope="module")
def pairs(checkpoints: dict[str, Path]) -> dict[str, tuple[LerobotBackend, LerobotBackend]]:
    """Per family: (eager, compiled) backends of the same checkpoint; the compiled one warmed up (compiled)."""
    out = {}
    for kind, buckets in BUCKETS.items():
        eager = backend_for(checkpoints[kind], "off")
        compiled = backend_for(checkpoints[kind], "on", buckets)
        compiled.compile_engine(max(buckets), progress=lambda _text: None)
        assert compiled.engine.path == "compiled", compiled.engine.reason
        out[kind] = (eager, compiled)
    return out


def requests(backend: LerobotBackend, rtc: bool, n: int, seed: int) -> list[tuple[ObservationMsg, RtcSettings | None]]:
    """`n` robots' requests; with `rtc`, each with its own prefix, delay and horizon (one robot without)."""
    torch.manual_seed(seed)
    base, _ = backend.infer(backend.new_session_state(), observation(backend, seed), None)
    out: list[tuple[ObservationMsg, RtcSettings | None]] = []
    for i in range(n):
        obs = observation(backend, seed + 1 + i)
        if rtc and i != 1:
            out.append((with_prefix(obs, base[2 + i :] + 0.5 * i, 1 + i), RtcSettings(True, 4 + 2 * i)))
        else:
            out.append((obs, None))
    return out


def served(backend: LerobotBackend, reqs: list[tuple[ObservationMsg, RtcSettings | None]], seed: int) -> list:
    torch.manual_seed(seed)  # the same noise for each robot on both paths (drawn per robot, in order)
    items = [(backend.new_session_state(), obs, rtc) for obs, rtc in reqs]
    return backend.infer_batch(items) if len(items) > 1 else [backend.infer(*items[0])]


@pytest.mark.parametrize("rtc", [False, True], ids=["plain", "rtc"])
@pytest.mark.parametrize("kind", list(BUCKETS))
def test_the_compiled_chunk_equals_the_eager_chunk_alone_and_in_a_padded_bucket(pairs, kind, rtc):
    eager, compiled = pairs[kind]
    before = compiled.engine.replays
    for n in (1, 2):  # pi0: 1 runs its own graph, 2 pads to 3; pi0.5, SmolVLA: 1 pads to 2, 2 fills it
        reqs = requests(eager, rtc, n, seed=10 * n)
        want, got = served(eager, reqs, 5), served(compiled, reqs, 5)
        for (m_want, r_want), (m_got, r_got) in zip(want, got, strict=True):
            assert np.isfinite(m_got).all()
            np.testing.assert_allclose(m_got, m_want, atol=COMPILED_ATOL, rtol=0)
            np.testing.assert_allclose(r_got, r_want, atol=1e-3, rtol=0)  # joint units, |actions| up to ~250
    assert compiled.engine.replays == before + 2 and compiled.engine.fallbacks == 0
    if rtc:  # the guidance changed the guided robot's chunk: parity with RTC is not parity without it
        plain = served(compiled, [(obs, None) for obs, _ in reqs], 5)
        assert np.abs(plain[0][0] - got[0][0]).max() > 0.1


def test_padding_rows_never_reach_a_real_row(pairs):
    """One robot padded to a bucket gives the same chunk whatever the other rows hold (pi0.5: bucket 2)."""
    eager, compiled = pairs["pi05"]
    alone = served(compiled, requests(eager, False, 1, seed=40), 3)[0][0]
    sampler = compiled.sampler
    assert sampler is not None
    pad = sampler._pad_rows  # noqa: SLF001

    def garbage_rows(value, rows):  # the padding rows hold noise, not copies of the first row
        padded = pad(value, rows)
        if isinstance(padded, torch.Tensor) and padded.is_floating_point() and padded.shape[0] == rows > 1:
            padded = padded.clone()
            padded[1:] = torch.randn_like(padded[1:]) * 50
        return padded

    sampler._pad_rows = garbage_rows  # noqa: SLF001
    try:
        noisy = served(compiled, requests(eager, False, 1, seed=40), 3)[0][0]
    finally:
        del sampler._pad_rows  # noqa: SLF001
    np.testing.assert_array_equal(noisy, alone)


def test_a_thousand_mixed_requests_compile_nothing_new(pairs):
    """Batch sizes, RTC on and off, delays, horizons, weights, schedules and tasks all vary; the graphs do not."""
    eager, compiled = pairs["pi0"]
    rng = random.Random(7)
    compiles, replays = compiled.engine.compiles, compiled.engine.replays
    assert compiles >= len(BUCKETS["pi0"])
    base, _ = eager.infer(eager.new_session_state(), observation(eager, 1), None)
    tasks = [TASK, "open the drawer", "stack the blocks", "fold the towel", "push the t to the target"]
    states = [compiled.new_session_state() for _ in range(6)]
    served_n = passes = 0
    while served_n < 1000:
        n = rng.choice([1, 1, 2, 3])
        items = []
        for _ in range(n):
            obs = observation(eager, rng.randrange(10_000), task=rng.choice(tasks))
            rtc = None
            if rng.random() < 0.6:
                delay, horizon = rng.randrange(0, 6), rng.randrange(1, 20)
                obs = with_prefix(obs, base[rng.randrange(1, 10) :] * rng.uniform(0.5, 1.5), delay)
                rtc = RtcSettings(True, horizon, rng.choice([1.0, 5.0, 10.0]), rng.choice(["LINEAR", "EXP", "ZEROS"]))
            items.append((rng.choice(states), obs, rtc))
        out = compiled.infer_batch(items)
        assert all(np.isfinite(m).all() for m, _ in out)
        served_n, passes = served_n + n, passes + 1
    assert compiled.engine.compiles == compiles  # 0 new compiles
    assert compiled.engine.fallbacks == 0
    assert compiled.engine.replays == replays + passes


def test_a_compile_that_fails_serves_eagerly_with_one_warning(checkpoints, monkeypatch, caplog):
    def broken_compile(fn, **_kwargs):
        def run(*_args, **_kw):
            raise RuntimeError("inductor: C++ compile failed (forced)")

        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    backend = backend_for(checkpoints["smolvla"], "on", [2])
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
    checkpoints, server_factory, robots, monkeypatch, caplog, broken
):
    """Through the real router and worker: the start line, the status and /metrics name the path; a forced compile
    failure still starts the server, which serves eagerly after one WARNING."""
    from lerobot_policy_remote.server.manifest import BatchingSpec
    from lerobot_policy_remote.wire.data import ActionChunkMsg

    if broken:

        def broken_compile(fn, **_kwargs):
            def run(*_args, **_kw):
                raise RuntimeError("inductor: forced failure")

            return run

        monkeypatch.setattr(torch, "compile", broken_compile)
    with caplog.at_level(logging.WARNING, logger="lerobot.policy_server"):
        server = server_factory(
            str(checkpoints["smolvla"]),
            model=ModelSpec(repo_or_path=str(checkpoints["smolvla"]), compile="on", compile_buckets=[2]),
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
