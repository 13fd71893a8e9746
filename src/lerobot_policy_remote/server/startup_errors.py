"""Turn a `lerobot-policy-server` startup failure into one line: what was wrong and what to do.

Why a mapping and not better messages at the raise sites: most of these come from huggingface_hub,
draccus or zenoh, whose messages name their own internals (repo-id grammar, cache lookups). The
traceback stays available with `--verbose` or `LOG_LEVEL=DEBUG`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

VERBOSE_HINT = "(run with --verbose or LOG_LEVEL=DEBUG for the traceback)"


def verbose_requested(args: list[str]) -> tuple[bool, list[str]]:
    """`--verbose`/`-v` (ours, removed before draccus sees the flags) or LOG_LEVEL=DEBUG."""
    rest = [a for a in args if a not in ("--verbose", "-v")]
    return len(rest) != len(args) or os.environ.get("LOG_LEVEL", "").upper() == "DEBUG", rest


def _names(exc: BaseException) -> set[str]:
    """Class names along the exception's MRO and its cause chain (no hub/draccus import needed)."""
    out: set[str] = set()
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.update(c.__name__ for c in type(e).__mro__)
        e = e.__cause__ or e.__context__
    return out


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", "./", "../", "~", ".\\")) or text.count("/") > 1 or os.sep in text and os.sep != "/"


def checkpoint_advice(repo_or_path: str, revision: str, exc: BaseException) -> str | None:
    """Advice for a model that could not be loaded, or None when `exc` is not a loading failure."""
    names = _names(exc)
    where = Path(repo_or_path).expanduser()
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if where.is_dir() and not (where / "config.json").is_file():
        return (
            f"{repo_or_path!r} is a directory but not a lerobot checkpoint (no config.json in it): point "
            "--model.repo_or_path at the pretrained_model directory of a training run (e.g. "
            "outputs/train/<run>/checkpoints/last/pretrained_model)"
        )
    if "HFValidationError" in names or (_looks_like_path(repo_or_path) and not where.exists()):
        return (
            f"no checkpoint directory at {repo_or_path!r}, and it is not a hub repo id you can reach: pass a local "
            "checkpoint directory (with config.json and model.safetensors) or a hub repo id like 'org/name'; "
            "if it is a hub id, check the network / HF_HUB_OFFLINE"
        )
    if "RevisionNotFoundError" in names:
        return (
            f"hub repo {repo_or_path!r} has no revision {revision!r}: set --model.revision to an existing branch, "
            "tag or commit (default main)"
        )
    if "RepositoryNotFoundError" in names or "GatedRepoError" in names:
        return (
            f"hub repo {repo_or_path!r} does not exist or you have no access to it: check the id (org/name), or log "
            "in (`hf auth login`) for a private or gated repo; a local checkpoint directory works too"
        )
    if "LocalEntryNotFoundError" in names or "OfflineModeIsEnabled" in names:
        why = "HF_HUB_OFFLINE is set" if offline else "the hub could not be reached"
        return (
            f"no checkpoint directory at {repo_or_path!r}, and it is not a hub repo id you can reach ({why} and it "
            "is not in the local cache): pass a local checkpoint directory, or check the network / unset "
            "HF_HUB_OFFLINE so it can be downloaded once"
        )
    if names & {"ConnectError", "ConnectionError", "ConnectTimeout", "ReadTimeout", "HfHubHTTPError"}:
        return (
            f"could not download {repo_or_path!r} from the Hugging Face hub: check the network or proxy, or set "
            "HF_HUB_OFFLINE=1 to use a copy already in the local cache"
        )
    if (
        "FileNotFoundError" in names
        and "config.json" not in str(exc)
        and ("safetensors" in str(exc) or "model" in str(exc))
    ):
        return (
            f"the checkpoint at {repo_or_path!r} is incomplete ({exc}): it needs config.json, model.safetensors and "
            "the saved processor pipelines; copy the whole pretrained_model directory"
        )
    return None


# What `pip install 'lerobot_policy_remote[vla]'` brings (lerobot's smolvla and pi extras), by import name and by
# the lerobot extra its "is required" message names.
VLA_MODULES = frozenset({"transformers", "accelerate", "num2words", "scipy"})
VLA_LEROBOT_EXTRAS = frozenset({"smolvla", "pi", "transformers-dep", "accelerate-dep", "scipy-dep"})
_REQUIRED = re.compile(r"'([\w.-]+)' is required but not installed.*?lerobot\[([\w-]+)\]")


def missing_module_advice(exc: BaseException) -> str | None:
    """The pip command for a package the model's code could not import, or None when `exc` is not one.

    lerobot raises `ImportError("'transformers' is required but not installed. Install it with: pip install
    'lerobot[smolvla]' ...")`; a plain import raises ModuleNotFoundError with `.name`. A missing module of lerobot
    or of this package is a broken install, not a missing extra: None.
    """
    e: BaseException | None = exc
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ImportError):
            found = _REQUIRED.search(str(e))
            if found:
                module, extra = found.group(1), found.group(2)
            elif isinstance(e, ModuleNotFoundError) and e.name:
                module, extra = e.name.split(".")[0], None
            else:
                module, extra = None, None
            if module and module not in ("lerobot", "lerobot_policy_remote"):
                if module in VLA_MODULES or extra in VLA_LEROBOT_EXTRAS:
                    return (
                        f"the policy needs the Python package {module!r}, which is not installed: pip install "
                        "'lerobot_policy_remote[vla]' (the SmolVLA / pi0 / pi0.5 dependencies)"
                    )
                how = (
                    f"pip install 'lerobot[{extra}]'"
                    if extra
                    else f"pip install {module} (or the lerobot extra of this policy family)"
                )
                return f"the policy needs the Python package {module!r}, which is not installed: {how}"
        e = e.__cause__  # not __context__: an ImportError handled inside a library (an optional speed-up) is no cause
    return None


def explain(exc: BaseException, manifest: Any | None = None, manifest_path: str | None = None) -> str:
    """One specific sentence for any startup failure; falls back to the exception text."""
    names = _names(exc)
    if manifest is None:  # failed while reading the manifest / flags
        if isinstance(exc, FileNotFoundError) and manifest_path:
            return (
                f"manifest file {manifest_path!r} not found: "
                "pass an existing YAML file with --manifest (see docs/server.md)"
            )
        if "DecodingError" in names:
            return (
                f"bad manifest value: {exc}. Fix that field in the manifest or on the command line (see docs/server.md)"
            )
        if "ParsingError" in names:
            return (
                f"could not read the manifest {manifest_path or ''!s}: it is not valid YAML ({exc.__cause__ or exc}); "
                "fix the file (see docs/server.md for an example)"
            )
        return f"could not parse the command line / manifest: {type(exc).__name__}: {exc} {VERBOSE_HINT}"
    if "ZenohConfigError" in names:
        from ..zenoh_config import SERVER_FLAGS

        return exc.in_words(SERVER_FLAGS) if hasattr(exc, "in_words") else str(exc)
    if "ManifestError" in names or "StartupRefusal" in names:
        return str(exc)  # already written for the user
    advice = missing_module_advice(exc) or checkpoint_advice(
        manifest.model.repo_or_path, manifest.model.revision or "main", exc
    )
    if advice:
        return advice
    if "OutOfMemoryError" in names:
        return (
            f"out of {manifest.model.device} memory while loading or warming up the model: use a smaller "
            "model.dtype (bfloat16/float16), a bigger device, or fewer warm-up inferences"
        )
    return f"startup failed: {type(exc).__name__}: {exc} {VERBOSE_HINT}"
