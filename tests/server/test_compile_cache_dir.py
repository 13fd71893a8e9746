"""Where compiled kernels persist: the manifest's `model.compile_cache_dir`, else a directory the user named, else a
home cache that survives a reboot (never torch's /tmp default, which importing inductor writes into the env)."""

from __future__ import annotations

import os

import pytest

from lerobot_policy_remote.server.policy_setup import use_cache_dir

VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_torchs_own_tmp_default_is_replaced_by_the_home_cache(env, tmp_path):
    import torch._inductor.codecache  # noqa: F401  # its import writes /tmp/torchinductor_<user> into the env
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    cache_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith("/tmp")
    root = use_cache_dir("")
    assert root == tmp_path / "home" / ".cache" / "lerobot_policy_remote" / "compile" and root.is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor") == cache_dir()
    assert os.environ["TRITON_CACHE_DIR"] == str(root / "triton")


def test_the_manifests_directory_wins_and_a_users_own_stands_without_one(env, tmp_path):
    env.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    use_cache_dir("")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")
    use_cache_dir(str(tmp_path / "chosen"))
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "chosen" / "inductor")
