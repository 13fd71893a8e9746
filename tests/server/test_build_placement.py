"""A policy is built on the accelerator it will run on, and nowhere else changes."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from lerobot_policy_remote.server.placement import built_on


def _torch_with(cuda: bool, mps: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: cuda),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps)),
        device=torch.device,
    )


def test_a_cpu_build_is_left_alone() -> None:
    assert isinstance(built_on(_torch_with(cuda=True), "cpu"), contextlib.nullcontext)


def test_a_gpu_model_is_built_on_its_gpu() -> None:
    assert built_on(_torch_with(cuda=True), "cuda:1") == torch.device("cuda:1")
    assert built_on(_torch_with(cuda=False, mps=True), "mps") == torch.device("mps")


def test_an_accelerator_torch_cannot_use_changes_nothing() -> None:
    assert isinstance(built_on(_torch_with(cuda=False), "cuda"), contextlib.nullcontext)


def test_tensors_made_inside_a_cpu_build_stay_on_the_cpu() -> None:
    with built_on(torch, "cpu"):
        assert torch.nn.Linear(2, 2).weight.device.type == "cpu"
