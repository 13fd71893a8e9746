"""The server's command line as a manifest: our own options taken out, the rest handed to draccus."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .manifest import Manifest


def take_option(args: list[str], name: str) -> tuple[str | None, list[str]]:
    """`--name X` / `--name=X` removed from `args` (ours, not draccus'): (value or None, the rest)."""
    value, rest, i = None, [], 0
    flag = f"--{name}"
    while i < len(args):
        a = args[i]
        if a == flag and i + 1 < len(args):
            value, i = args[i + 1], i + 2
            continue
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    return value, rest


def split_manifest(args: list[str]) -> tuple[str | None, list[str]]:
    """`--manifest X` / `--manifest=X` -> draccus' config_path; everything else goes to draccus."""
    return take_option(args, "manifest")


_LIST_FLAGS = ("--zenoh.connect_endpoints=", "--zenoh.listen_endpoints=")


def endpoints_as_lists(args: list[str]) -> list[str]:
    """`--zenoh.connect_endpoints=tcp/h:7447` (no brackets, like the robot's flag) -> `=[tcp/h:7447]` for draccus."""
    out = []
    for a in args:
        flag = next((f for f in _LIST_FLAGS if a.startswith(f)), None)
        if flag is not None and not a[len(flag) :].lstrip().startswith("["):
            a = f"{flag}[{a[len(flag) :]}]"
        out.append(a)
    return out


def parse_manifest(args: list[str]) -> Manifest:
    """Flags and an optional `--manifest FILE` -> the validated-by-type manifest (draccus raises on bad input)."""
    import draccus

    from .manifest import Manifest

    path, rest = split_manifest(args)
    return draccus.parse(Manifest, config_path=path, args=endpoints_as_lists(rest))
