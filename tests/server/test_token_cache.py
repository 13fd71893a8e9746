"""A session's memo of its task tokenization (server/token_cache.py): it hands out exactly what lerobot's tokenizer
step computes, a new task string gets its own tokens, and a session reset forgets what it remembered."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lerobot_policy_remote.server.backend import LerobotBackend
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.server.token_cache import TokenCache
from lerobot_policy_remote.testing.vla import VLA_CAMERA, save_tiny_smolvla
from lerobot_policy_remote.wire.data import ObservationMsg

TASK = "pick up the cube"
OTHER = "fold the towel"
TOKENS = "observation.language.tokens"
MASK = "observation.language.attention_mask"
CAM = f"observation.images.{VLA_CAMERA}"


class CountingTokenizer:
    """Stands in for the step's `_tokenize_text`: a text's ids are its characters' codes; counts its calls."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, text: str | list[str]) -> dict[str, torch.Tensor]:
        self.calls.append(text)
        texts = [text] if isinstance(text, str) else text
        ids = torch.tensor([[ord(c) for c in t.ljust(16)[:16]] for t in texts])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def test_a_text_is_tokenized_once_and_a_new_text_gets_its_own_tokens() -> None:
    tok = CountingTokenizer()
    cache = TokenCache(tok)
    first = cache([TASK])
    again = cache([TASK])
    assert len(tok.calls) == 1 and (cache.hits, cache.misses) == (1, 1)
    assert torch.equal(first["input_ids"], again["input_ids"])
    other = cache([OTHER])
    assert len(tok.calls) == 2
    assert torch.equal(other["input_ids"], tok([OTHER])["input_ids"])
    assert not torch.equal(other["input_ids"], first["input_ids"])
    assert torch.equal(cache(TASK)["input_ids"], first["input_ids"])  # a str and its one-item list: the same key


def test_a_hit_hands_out_copies_and_clear_forgets() -> None:
    tok = CountingTokenizer()
    cache = TokenCache(tok)
    cache([TASK])["input_ids"].zero_()  # whatever a caller does to its tokens, the next pass reads the real ones
    assert torch.equal(cache([TASK])["input_ids"], tok([TASK])["input_ids"])
    cache.clear()
    assert len(cache) == 0
    cache([TASK])
    assert tok.calls.count([TASK]) == 3  # two misses (before and after clear) plus the reference call above


def test_the_memo_stays_bounded() -> None:
    tok = CountingTokenizer()
    cache = TokenCache(tok, max_texts=3)
    for i in range(10):
        cache([f"task {i}"])
    assert len(cache) == 3
    cache(["task 9"])
    assert len(tok.calls) == 10  # the newest stayed


@pytest.fixture(scope="module")
def vla(tmp_path_factory: pytest.TempPathFactory) -> LerobotBackend:
    path = save_tiny_smolvla(Path(tmp_path_factory.mktemp("smolvla")) / "smolvla", chunk_size=10)
    manifest = Manifest(model=ModelSpec(repo_or_path=str(path)), default_task=TASK, health_port=0)
    return LerobotBackend(manifest, progress=lambda _text: None)


def raw_batch(vla: LerobotBackend, task: str) -> dict[str, Any]:
    """What the preprocessor takes: a batch as lerobot's `prepare_observation_for_inference` builds it."""
    rng = np.random.default_rng(0)
    (_, h, w) = vla.caps.image_shapes[CAM]
    return {
        "observation.state": torch.from_numpy(rng.normal(0, 20, (1, vla.caps.state_dim)).astype(np.float32)),
        CAM: torch.from_numpy(rng.random((1, 3, h, w), dtype=np.float32)),
        "task": [task],
        "robot_type": "",
    }


def observation(vla: LerobotBackend, task: str) -> ObservationMsg:
    rng = np.random.default_rng(1)
    (_, h, w) = vla.caps.image_shapes[CAM]
    return ObservationMsg(
        state={"observation.state": rng.normal(0, 20, vla.caps.state_dim).astype(np.float32)},
        images={CAM: rng.integers(0, 255, (h, w, 3), dtype=np.uint8)},
        task=task,
    )


def test_a_session_preprocesses_as_lerobots_own_pipeline_across_task_changes_and_resets(vla: LerobotBackend) -> None:
    state = vla.new_session_state()
    assert len(state.token_caches) == 1, "the tiny SmolVLA's preprocessor has one tokenizer step"
    (cache,) = state.token_caches
    plain = copy.deepcopy(vla.pre)  # lerobot's pipeline as loaded, no memo

    def both(task: str) -> tuple[dict[str, Any], dict[str, Any]]:
        with torch.inference_mode():
            return state.pre(raw_batch(vla, task)), plain(raw_batch(vla, task))

    for task in (TASK, TASK, OTHER, OTHER, TASK):
        ours, theirs = both(task)
        assert ours.keys() == theirs.keys()
        for key in (TOKENS, MASK, "observation.state", CAM):
            assert torch.equal(ours[key], theirs[key]), (task, key)
            assert ours[key].dtype == theirs[key].dtype
    assert (cache.misses, cache.hits) == (2, 3)
    assert not torch.equal(both(TASK)[0][TOKENS], both(OTHER)[0][TOKENS])

    vla.reset_session(state)
    assert len(cache) == 0
    ours, theirs = both(OTHER)
    assert torch.equal(ours[TOKENS], theirs[TOKENS])
    assert cache.misses == 3


def test_a_robot_that_changes_task_gets_the_chunk_a_fresh_session_gets(vla: LerobotBackend) -> None:
    def chunk(state: Any, task: str) -> np.ndarray:
        torch.manual_seed(0)
        return vla.infer(state, observation(vla, task), None)[1]

    used = vla.new_session_state()
    first = chunk(used, TASK)
    switched = chunk(used, OTHER)
    np.testing.assert_array_equal(switched, chunk(vla.new_session_state(), OTHER))
    np.testing.assert_array_equal(chunk(used, TASK), first)
    assert not np.array_equal(switched, first), "the task should change the tiny SmolVLA's chunk"


def test_sessions_do_not_share_a_memo(vla: LerobotBackend) -> None:
    a, b = vla.new_session_state(), vla.new_session_state()
    with torch.inference_mode():
        a.pre(raw_batch(vla, TASK))
    assert len(a.token_caches[0]) == 1 and len(b.token_caches[0]) == 0
    assert "_tokenize_text" not in vars(next(s for s in vla.pre.steps if hasattr(s, "input_tokenizer")))
