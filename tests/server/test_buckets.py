"""Batch buckets (server/buckets.py) and what the compiled sampler asks of torch for them (pure units)."""

from __future__ import annotations

import pytest
import torch

from lerobot_policy_remote.server.buckets import batch_buckets, bucket_for
from lerobot_policy_remote.server.compiled import CompiledSampler, EngineStats, wants_compile


@pytest.mark.parametrize(
    "max_batch, chosen, want",
    [
        (1, (), (1,)),
        (8, (), (1, 2, 4, 8)),
        (12, (), (1, 2, 4, 8, 12)),
        (8, (1, 4), (1, 4, 8)),  # the largest is always max_batch: every pass has a bucket
        (8, (4, 1, 4, 16, 0), (1, 4, 8)),  # sorted, unique, within 1..max_batch
    ],
)
def test_buckets_cover_every_batch_up_to_max_batch(max_batch, chosen, want):
    buckets = batch_buckets(max_batch, chosen)
    assert buckets == want
    for rows in range(1, max_batch + 1):
        size = bucket_for(rows, buckets)
        assert size is not None and size >= rows
        assert all(b < rows for b in buckets if b < size)  # the smallest that holds them
    assert bucket_for(max_batch + 1, buckets) is None


def test_max_batch_must_be_positive():
    with pytest.raises(ValueError):
        batch_buckets(0)


def test_auto_compiles_on_cuda_only_and_on_and_off_mean_it():
    assert wants_compile("auto", "cuda") and wants_compile("auto", "cuda:1")
    assert not wants_compile("auto", "cpu") and not wants_compile("auto", "mps")
    assert wants_compile("on", "cpu") and not wants_compile("off", "cuda")


class _Model(torch.nn.Module):
    def embed_prefix(self, *args):
        return args

    def denoise_step(self, *args):
        return args

    def sample_actions(self, *args, noise=None):
        return noise


def test_torch_keeps_a_graph_per_bucket_for_each_region(monkeypatch):
    """dynamo keeps 8 graphs per code object by default and runs the rest eagerly without a word: a sampler with
    many buckets raises that limit so each bucket keeps its graph."""
    import torch._dynamo.config as dynamo_config

    monkeypatch.setattr(dynamo_config, "recompile_limit", 8)
    buckets = batch_buckets(16, tuple(range(1, 17)))
    CompiledSampler(
        torch, _Model(), None, device="cpu", buckets=buckets, token_length=None, chunk=(4, 2), stats=EngineStats()
    )
    assert dynamo_config.recompile_limit >= 2 * len(buckets)
