"""The demo's second model (`lerobot-fleet demo --second-model`): a copy of its checkpoint with other weights.

A rollout moves robots between two checkpoints of one policy: same type, same features, same action names, other
weights, so another fingerprint (the sha256 of the weight files). The demo derives that second checkpoint from the
first by rewriting one tensor of its `model.safetensors` in place, with the standard library only: this process
imports neither torch nor lerobot, and a second build in a child would give the same weights (the demo's policies
are built from a fixed seed).
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

REVISION = "v2"  # the namespace the second model is served in (`--model.revision`); `rollout start --to v2`
WEIGHTS = "model.safetensors"
# bytes per element of the floating dtypes safetensors stores; every one keeps its sign in the top bit of its last
# byte (little-endian), so flipping that bit negates the value whatever the dtype
FLOAT_SIZES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}


class CheckpointError(RuntimeError):
    """The first checkpoint has no tensor the second could differ in; the text says which file."""


def derive_checkpoint(source: Path, target: Path) -> Path:
    """Copy the checkpoint `source` to `target` and negate its smallest non-zero floating tensor: the same policy,
    features and action names with other weights (and so other actions and another fingerprint)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    negate_smallest_tensor(target / WEIGHTS)
    return target


def negate_smallest_tensor(path: Path) -> str:
    """Negate every element of the smallest floating tensor of the safetensors file `path` that is not all zero
    (negating zeros would change the bytes, not the weights); returns its name."""
    data = bytearray(path.read_bytes())
    try:
        (size,) = struct.unpack_from("<Q", data, 0)
        header = json.loads(data[8 : 8 + size])
    except (struct.error, ValueError) as exc:
        raise CheckpointError(f"{path} is not a safetensors file: {exc}") from None
    start = 8 + size
    found: list[tuple[int, str, int, int, int]] = []  # (bytes, name, begin, end, element size)
    for name, spec in header.items():
        if name == "__metadata__" or spec.get("dtype") not in FLOAT_SIZES:
            continue
        begin, end = (start + int(o) for o in spec["data_offsets"])
        if any(data[begin:end]):
            found.append((end - begin, name, begin, end, FLOAT_SIZES[spec["dtype"]]))
    if not found:
        raise CheckpointError(f"{path} has no non-zero floating tensor to change for the second model")
    _, name, begin, end, width = min(found)
    for top in range(begin + width - 1, end, width):
        data[top] ^= 0x80
    path.write_bytes(bytes(data))
    return name
