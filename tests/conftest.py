"""Fixtures with real parts: Zenoh routers on free loopback ports (in this process, or as a process to kill)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

# The suite runs four xdist workers on a 2-core box, each starting servers, rollouts and routers: one torch
# (OpenMP) thread per process keeps them from oversubscribing the cores (a server's worker now really uses
# torch's full count, server/torch_threads.py; two such teams spinning on two cores stalled round trips for
# ~1 s under the full suite). Set before anything imports torch; processes the tests start inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The compiled-pass tests build scalar C++ kernels: what they check is our compiled path (buckets, padding, RTC's plan
# as tensors, the eager fallback, no recompiles), not inductor's vector code, and scalar kernels cost a quarter less
# CPU to build (SmolVLA cold: 97 CPU-s instead of 130). It also spares each compiling process inductor's probe of
# the CPU's vector instructions (a C++ build and a fresh interpreter per instruction set). To check the vector
# kernels too: `TORCHINDUCTOR_VEC_ISA_OK=1 pytest tests/server/test_compiled_pass_pi0.py` (docs/decisions.md).
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "0")
# No test reaches the Hugging Face hub: every checkpoint, tokenizer and backbone is built offline. Saying so for the
# whole run also lets the children the demo starts for a VLA (which set it) fork from the suite's zygote.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from lerobot_policy_remote.testing.procs import Router, free_port

if TYPE_CHECKING:
    import execnet

    from lerobot_policy_remote.testing.warm_start import Zygote

# Bytecode caches are written even when PYTHONDONTWRITEBYTECODE is set: without them each worker
# rewrites and compiles every test module at collection, and every process compiles the package again (about 9 s
# of CPU per worker on the 2-core box). This process writes them; the processes it starts read them.
sys.dont_write_bytecode = False


class InProcessRouter:
    """`lerobot-fleet router`'s own settings, served by a router-mode session inside the test process:
    the same routing, no process to start (tests that kill or restart a router use `own_router`)."""

    def __init__(self) -> None:
        self.endpoint = f"tcp/127.0.0.1:{free_port()}"
        self._session = None

    def start(self) -> InProcessRouter:
        from lerobot_fleet.router.router import router_settings

        from lerobot_policy_remote.zenoh_config import open_session

        self._session = open_session(router_settings([self.endpoint]))
        return self

    def stop(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


@pytest.fixture(scope="session", autouse=True)
def warm_starts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The heavy children this run starts (`lerobot-rollout`, `lerobot-policy-server`) fork from a zygote that
    has imported lerobot once (testing/warm_start.py): each start costs ~2 s of CPU instead of ~14. A run with slow
    tests starts it at once, so that the programs they start (the demo, the bench) find it ready too."""
    from lerobot_policy_remote.testing import warm_start

    zygotes = warm_start.enable(tmp_path_factory.mktemp("warm"))
    if any(item.get_closest_marker("slow") for item in request.session.items):
        zygotes.default.start()
    yield
    warm_start.disable()


@pytest.fixture(scope="session")
def router() -> Iterator[InProcessRouter]:
    """One router for the whole run (tests isolate themselves by service name)."""
    r = InProcessRouter().start()
    yield r
    r.stop()


@pytest.fixture
def own_router() -> Iterator[Router]:
    """A router this test may kill and restart."""
    r = Router().start()
    yield r
    r.stop()


@pytest.fixture
def zenoh_client(router: Router):
    """Factory for client sessions through the shared router; all are closed after the test."""
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    sessions = []

    def make(**overrides):
        settings = ZenohSettings(mode="client", connect_endpoints=[router.endpoint], **overrides)
        s = open_session(settings)
        sessions.append(s)
        return s

    yield make
    for s in sessions:
        s.close()


# The files that take over a minute on the 2-core box (an empty compile cache for the compiled pass), longest first:
# SmolVLA's and pi0's compiles (one core each, mostly) beside a wall-bound file, and pi0.5 after pi0 (it reuses most
# of pi0's kernels from the cache): a scheduling hint only (a stale list costs time, never a test).
LONGEST_FIRST = (
    "server/test_compiled_pass_smolvla.py",
    "server/test_compiled_pass_pi0.py",
    "prod/test_acl_fleet.py",
    "test_peers_faults_smoke.py",
    "test_demo.py",
    "test_peers_vla_smoke.py",
    "engine/test_vla_rollout.py",
    "test_kit_warm_start.py",
    "server/test_compiled_pass_pi05.py",
    "engine/test_recording_procs.py",
    "engine/test_rollout_exit.py",
    "test_peers_smoke.py",
    "prod/test_second_contact.py",
)


_workers_zygote: list[Zygote] = []


def pytest_configure(config: pytest.Config) -> None:
    """A run on xdist workers forks them from one zygote that has imported lerobot and the test stack
    (testing/warm_workers.py): each worker's collection costs ~3 s of CPU instead of ~20, and its first tests no
    longer import the rest of lerobot."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no" or not config.getoption("tx", None):
        return
    from lerobot_policy_remote.testing import warm_workers

    _workers_zygote.append(warm_workers.start(Path(tempfile.mkdtemp(prefix="pytest-workers-"))))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[execnet.XSpec]) -> None:
    from lerobot_policy_remote.testing import warm_workers

    for zygote in _workers_zygote:
        for spec in specs:
            spec.python = warm_workers.interpreter(zygote.path)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _workers_zygote:
        zygote = _workers_zygote.pop()
        zygote.close()
        shutil.rmtree(Path(zygote.path).parent, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, then the other slow (real-process) tests, then the rest: each worker takes a file
    at a time, so the long ones start early and the short ones fill the end of the run instead of one long file
    running alone at the end."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0].removeprefix("tests/")
        if path in LONGEST_FIRST:
            return (0, LONGEST_FIRST.index(path))
        return (1, 0) if item.get_closest_marker("slow") else (2, 0)

    items.sort(key=rank)
