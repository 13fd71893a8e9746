"""Server fixtures: tiny real checkpoints (module-scoped) and in-process PolicyServer factories."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.testing.procs import free_port
from lerobot_policy_remote.zenoh_config import ZenohSettings

_ids = itertools.count()


@pytest.fixture(scope="module", autouse=True)
def compile_cache_env() -> Iterator[None]:
    """A server built in the test process points torch's compile caches at its directory (`use_cache_dir`): put the
    worker's environment back after each file, or every later child would inherit a TORCH* variable its zygote
    does not have and start fresh (14 s of CPU each)."""
    names = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    before = {name: os.environ.get(name) for name in names}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def act_ckpt(tmp_path_factory: pytest.TempPathFactory):
    from lerobot_policy_remote.testing.policies import save_tiny_act

    return save_tiny_act(tmp_path_factory.mktemp("act"))


@pytest.fixture(scope="session")
def act_rel_ckpt(tmp_path_factory: pytest.TempPathFactory):
    from lerobot_policy_remote.testing.policies import save_tiny_act

    return save_tiny_act(tmp_path_factory.mktemp("act_rel"), relative_actions=True)


@pytest.fixture(scope="session")
def diffusion_ckpt(tmp_path_factory: pytest.TempPathFactory):
    from lerobot_policy_remote.testing.policies import save_tiny_diffusion

    return save_tiny_diffusion(tmp_path_factory.mktemp("diffusion"))


def make_manifest(router: Any, path: str, **kw: Any) -> Manifest:
    """A manifest on the shared router; a unique task keeps tests isolated from each other."""
    kw.setdefault("default_task", f"test task {next(_ids)} {uuid.uuid4().hex[:6]}")
    kw.setdefault("health_port", free_port())
    kw.setdefault("warmup_inferences", 1)
    kw.setdefault("session_grace_s", 1.0)
    return Manifest(
        model=kw.pop("model", None) or ModelSpec(repo_or_path=str(path)),
        zenoh=ZenohSettings(mode="client", connect_endpoints=[router.endpoint]),
        **kw,
    )


@pytest.fixture
def server_factory(router: Any) -> Iterator[Any]:
    from lerobot_policy_remote.server.service import PolicyServer

    servers: list[PolicyServer] = []

    def make(path: str, backend: Any = None, **kw: Any) -> PolicyServer:
        s = PolicyServer(make_manifest(router, path, **kw), backend=backend, progress=lambda t: None).start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def robots(zenoh_client: Any) -> Any:
    """Factory: robots(server, n) -> n Robots, each on its own zenoh client session."""
    from lerobot_policy_remote.testing.fake_robot import FakeRobot

    def make(server: Any, n: int = 1, prefix: str = "robot") -> list[FakeRobot]:
        return [FakeRobot(zenoh_client(), server.keys, f"{prefix}-{i}-{uuid.uuid4().hex[:6]}") for i in range(n)]

    return make


def saturate(server: Any, fleet: list[Any], seconds: float, sends: Callable[[int], int]) -> list[int]:
    """Each robot sends `sends(i)` observations, waits for the chunk of the last, repeats for `seconds` (a
    measuring window, not synchronisation); returns the chunks the server served to each robot."""
    import threading
    import time

    import numpy as np

    from lerobot_policy_remote.wire.data import ActionChunkMsg

    stop = threading.Event()

    def loop(i: int) -> None:
        r = fleet[i]
        while not stop.is_set():
            for _ in range(sends(i)):
                r.send(np.full(6, float(i)))
            try:
                r.wait_for(lambda h, b: isinstance(b, ActionChunkMsg) and h.seq_id == r.seq, 10)
            except Exception:
                continue  # a lost message: send again

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(fleet))]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(15)
    by_client = {s.client_uuid: s.requests for s in server.registry.all()}
    return [by_client[r.uuid] for r in fleet]
