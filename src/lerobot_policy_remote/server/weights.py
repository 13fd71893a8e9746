"""Refuse a checkpoint whose weights do not fit the model lerobot built from its config.json.

Why a check of our own: lerobot 0.6.1 loads leniently. The generic `PreTrainedPolicy.from_pretrained`
(ACT, diffusion, SmolVLA) loads with `strict=False` and only logs missing / unexpected keys; pi0 and
pi0.5 catch every loading error, print a warning and return the randomly initialised model. Either
way a server would serve weights that were never loaded. This check reads only the safetensors
headers (names and shapes, no tensor data), maps the names the way the family's loader does, and
compares them with the model's `state_dict()`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .capabilities import StartupRefusal

log = logging.getLogger("lerobot.policy_server")

SHOWN = 3  # names shown per kind of mismatch; the rest are counted


@dataclass(frozen=True)
class _Shape:
    """A tensor's place in the file without its data: what the family's key remapping is handed."""

    shape: tuple[int, ...]

    def clone(self) -> _Shape:  # pi0/pi0.5 copy lm_head into embed_tokens with `.clone()`
        return self


def file_shapes(files: Iterable[Path]) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from the safetensors headers (no tensor is read)."""
    from safetensors import safe_open

    out: dict[str, tuple[int, ...]] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as fh:
            for k in fh.keys():
                out[k] = tuple(fh.get_slice(k).get_shape())
    return out


def own_loader(policy: Any) -> bool:
    """Does the family load its weights with a key mapping this check does not know (e.g. X-VLA, GR00T)?

    The generic loader (ACT, diffusion, SmolVLA) uses the file's names as they are; the openpi ports (pi0,
    pi0.5, pi0-FAST) remap them with `_fix_pytorch_state_dict_keys` and a `model.` prefix. Any other override
    of the loading methods is the family's own business (those in lerobot 0.6.1 load strictly, or
    re-initialise chosen modules on purpose).
    """
    from lerobot.policies.pretrained import PreTrainedPolicy

    if hasattr(policy, "_fix_pytorch_state_dict_keys"):
        return False
    cls = type(policy)
    return any(
        getattr(cls, name).__func__ is not getattr(PreTrainedPolicy, name).__func__
        for name in ("from_pretrained", "_load_as_safetensor")
    )


def as_loaded(policy: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The file's names as the family's loader hands them to `load_state_dict`."""
    fix = getattr(policy, "_fix_pytorch_state_dict_keys", None)
    if fix is None:
        return dict(shapes)
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the remapping logs per key; lerobot's own load just logged the same
    try:
        fixed = fix({k: _Shape(v) for k, v in shapes.items()}, policy.config)
    finally:
        logging.disable(previous)
    return {(k if k.startswith("model.") else f"model.{k}"): v.shape for k, v in fixed.items()}


@dataclass
class Mismatch:
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    shapes: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)  # name, file, model

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.shapes)


def compare(model_state: dict[str, Any], loaded: dict[str, tuple[int, ...]]) -> Mismatch:
    """Missing, unexpected and mis-shaped names. Tied tensors are saved once (safetensors' `save_model`
    keeps one name per shared storage), so a model name counts as present when a name sharing its tensor is."""
    aliases: dict[tuple[str, int, tuple[int, ...]], list[str]] = {}
    for k, t in model_state.items():
        if t.numel() and t.data_ptr():
            aliases.setdefault((str(t.device), t.data_ptr(), tuple(t.shape)), []).append(k)

    def present(k: str, t: Any) -> bool:
        if k in loaded:
            return True
        if not (t.numel() and t.data_ptr()):
            return False
        return any(o in loaded for o in aliases.get((str(t.device), t.data_ptr(), tuple(t.shape)), ()))

    out = Mismatch()
    out.missing = [k for k, t in model_state.items() if not present(k, t)]
    out.unexpected = [k for k in loaded if k not in model_state]
    out.shapes = [
        (k, loaded[k], tuple(t.shape))
        for k, t in model_state.items()
        if k in loaded and tuple(loaded[k]) != tuple(t.shape)
    ]
    return out


def _first(names: list[str]) -> str:
    if not names:
        return ""
    more = f", +{len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return f" ({', '.join(names[:SHOWN])}{more})"


def _shape(s: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("es" if what.endswith("mismatch") and n != 1 else "")


def describe(policy_type: str, m: Mismatch, *, compared: tuple[str, ...] = ("missing", "unexpected", "shapes")) -> str:
    """One line: the family, the counts (of the kinds `compared`), the first names, and what to do."""
    parts = {
        "missing": _count(len(m.missing), "missing") + _first(m.missing),
        "unexpected": _count(len(m.unexpected), "unexpected") + _first(m.unexpected),
        "shapes": _count(len(m.shapes), "shape mismatch")
        + _first([f"{k} {_shape(f)} in the file, {_shape(w)} in the model" for k, f, w in m.shapes]),
    }
    return (
        f"the checkpoint's weights do not fit this {policy_type} model: {', '.join(parts[k] for k in compared)}: "
        "the checkpoint is incomplete or was trained with another configuration (config.json); re-export it from "
        "the training run (config.json and model.safetensors of the same pretrained_model directory)"
    )


_SIZE = re.compile(
    r"size mismatch for (\S+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from checkpoint, "
    r"the shape in current model is torch\.Size\(\[([\d, ]*)\]\)"
)
_KEYS = re.compile(r'(Missing|Unexpected) key\(s\) in state_dict: ((?:"[^"]*"(?:, )?)+)')


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.replace(" ", "").split(",") if d)


def load_error_refusal(policy_type: str, exc: BaseException) -> StartupRefusal | None:
    """torch's multi-line `Error(s) in loading state_dict` (raised by lerobot's loader on a shape mismatch even
    when it loads leniently, or by a strict one) as the same one line; None for any other error."""
    text = str(exc)
    if not isinstance(exc, RuntimeError) or "Error(s) in loading state_dict" not in text:
        return None
    m = Mismatch()
    for kind, names in _KEYS.findall(text):
        (m.missing if kind == "Missing" else m.unexpected).extend(re.findall(r'"([^"]*)"', names))
    m.shapes = [(k, _dims(f), _dims(w)) for k, f, w in _SIZE.findall(text)]
    if not m:
        return None
    # torch lists missing / unexpected names only for a strict load: count only the kinds it compared
    compared = ("missing", "unexpected", "shapes") if m.missing or m.unexpected else ("shapes",)
    return StartupRefusal(describe(policy_type, m, compared=compared))


def check_weights(policy: Any, policy_type: str, files: list[Path]) -> None:
    """Raise StartupRefusal unless every weight of `policy` is in `files` with its shape, and nothing else is."""
    if own_loader(policy):
        log.info("weights: %s loads its checkpoint with its own key mapping; lerobot's loader checks it", policy_type)
        return
    # what lerobot's loaders read (never a processor's normalizer stats, which the backend's glob may return)
    files = [f for f in files if f.name == "model.safetensors"] or [f for f in files if f.name.startswith("model")]
    if not files:
        raise StartupRefusal(
            f"the checkpoint has no model.safetensors, so this {policy_type} model would run randomly "
            "initialised: copy the whole pretrained_model directory of the training run"
        )
    mismatch = compare(policy.state_dict(), as_loaded(policy, file_shapes(files)))
    if mismatch:
        raise StartupRefusal(describe(policy_type, mismatch))


def fingerprint_files(files: list[Path]) -> str:
    """sha256 over the weight files in name order: identifies the exact checkpoint bytes."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.name):
        h.update(f.name.encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def find_weight_files(repo_or_path: str, revision: str | None) -> list[Path]:
    """The checkpoint's safetensors files: a local folder's `model*` files (else all), or the hub's model file."""
    path = Path(repo_or_path)
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        weights = [f for f in files if f.name.startswith("model")] or files
        return weights
    from huggingface_hub import hf_hub_download

    return [Path(hf_hub_download(repo_or_path, "model.safetensors", revision=revision))]
