"""The rollout's state on disk, beside the fleet router: a router (or a console, or a verb) started later sees the
rollout where it was. One JSON file, replaced atomically after every change, so a crash leaves the old or the new
state, never half of one."""

from __future__ import annotations

import os
from pathlib import Path

from lerobot_policy_remote.wire.codec import decode_json, encode_json
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.rollout import RolloutStatus


def default_path(inventory: str | None, listen: list[str]) -> Path:
    """Beside the inventory when the router has one (the fleet's own file); else in the user's state directory,
    one file per listen endpoint (two routers on one machine keep two rollouts)."""
    if inventory:
        inv = Path(inventory)
        return inv.with_name(f"{inv.stem}.rollout.json")
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "lerobot-fleet"
    tag = "".join(c if c.isalnum() else "-" for c in (listen[0] if listen else "router")).strip("-")
    return base / f"rollout-{tag}.json"


def load(path: Path) -> tuple[RolloutStatus | None, str]:
    """(the state, '') ; (None, '') without a file; (None, why) when it cannot be read (the file is kept aside)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"cannot read the rollout state {path} ({exc.strerror}): starting without a rollout"
    try:
        return decode_json(RolloutStatus, data), ""
    except WireError as exc:
        aside = path.with_suffix(path.suffix + ".unreadable")
        os.replace(path, aside)
        return None, f"the rollout state {path} is not readable ({exc}); kept as {aside}, starting without a rollout"


def save(path: Path, status: RolloutStatus) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(encode_json(status))
    os.replace(tmp, path)
