"""The compiled pass's parity kit, shared by its per-family test files (one file per family, so that the families'
compiles run on different workers): tiny checkpoints built offline, an eager and a compiled backend of each, requests
with and without RTC, and the parity check. On the CPU each bucket compiles for about a minute (inductor's C++)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from lerobot_policy_remote.server.backend import LerobotBackend
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.testing import tiny_pi
from lerobot_policy_remote.testing.vla import SAVERS, with_prefix
from lerobot_policy_remote.testing.vla import wire_observation as observation
from lerobot_policy_remote.wire.data import ObservationMsg
from lerobot_policy_remote.wire.messages import RtcSettings

COMPILED_ATOL = 1e-5  # model space, float32 on the CPU (measured <= 4.8e-7)
TASK = "pick up the cube"


def checkpoint(kind: str, folder: Path) -> Path:
    """A tiny random checkpoint of `kind` (smolvla, pi0, pi05) saved in `folder`."""
    tiny_pi.install()
    return SAVERS[kind](folder)


def backend_for(path: Path, compile_choice: str, buckets: list[int] | None = None) -> LerobotBackend:
    manifest = Manifest(model=ModelSpec(repo_or_path=str(path), compile=compile_choice), default_task=TASK)
    manifest.model.compile_buckets = list(buckets or [])
    return LerobotBackend(manifest, progress=lambda _text: None)


def compiled_pair(path: Path, buckets: list[int]) -> tuple[LerobotBackend, LerobotBackend]:
    """(eager, compiled) backends of one checkpoint; the compiled one warmed up (its buckets compiled)."""
    eager = backend_for(path, "off")
    compiled = backend_for(path, "on", buckets)
    compiled.compile_engine(max(buckets), progress=lambda _text: None)
    assert compiled.engine.path == "compiled", compiled.engine.reason
    return eager, compiled


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


def check_parity(eager: LerobotBackend, compiled: LerobotBackend, rtc: bool) -> None:
    """One robot and two (one of them padded to its bucket): the compiled chunks equal the eager ones, each pass ran
    a compiled graph, and with RTC the guidance changed the chunk (parity with RTC is not parity without it)."""
    before = compiled.engine.replays
    for n in (1, 2):
        reqs = requests(eager, rtc, n, seed=10 * n)
        want, got = served(eager, reqs, 5), served(compiled, reqs, 5)
        for (m_want, r_want), (m_got, r_got) in zip(want, got, strict=True):
            assert np.isfinite(m_got).all()
            np.testing.assert_allclose(m_got, m_want, atol=COMPILED_ATOL, rtol=0)
            np.testing.assert_allclose(r_got, r_want, atol=1e-3, rtol=0)  # joint units, |actions| up to ~250
    assert compiled.engine.replays == before + 2 and compiled.engine.fallbacks == 0
    if rtc:
        plain = served(compiled, [(obs, None) for obs, _ in reqs], 5)
        assert np.abs(plain[0][0] - got[0][0]).max() > 0.1


def broken_compile(fn, **_kwargs):
    """Stands in for `torch.compile`: every compiled region fails when first called (a compile that fails)."""

    def run(*_args, **_kw):
        raise RuntimeError("inductor: C++ compile failed (forced)")

    return run
