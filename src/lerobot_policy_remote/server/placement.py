"""Where a policy is built: on the accelerator it will run on."""

from __future__ import annotations

import contextlib
from typing import Any


def built_on(torch: Any, device: str) -> contextlib.AbstractContextManager[Any]:
    """A context in which new tensors are created on `device` when it is an accelerator torch can use.

    Why: lerobot builds a policy from its config (random initialisation) before it loads the weights over it. For a
    stock-size pi0 (4 B parameters) that initialisation takes minutes on a CPU and moments on a GPU, and the loaded
    weights replace it either way. On the CPU, or an accelerator this torch cannot use, nothing changes.
    """
    kind = device.split(":")[0]
    if (kind == "cuda" and torch.cuda.is_available()) or (kind == "mps" and torch.backends.mps.is_available()):
        target: contextlib.AbstractContextManager[Any] = torch.device(device)  # a torch.device is a context manager
        return target
    return contextlib.nullcontext()
