"""Every command in README.md and docs/ parses with the program it is given to, and the
walk-through commands use the guide's one task string and one router port.

Each fenced shell block is split into commands (backslash continuations joined, `&&` split, comments dropped);
for `lerobot-policy-server` the flags are parsed by draccus into the real `Manifest`; for `lerobot-rollout`
each `--a.b.c` must name a field of lerobot's `RolloutConfig` (choice types resolved by the `.type=` given);
for `lerobot-fleet` each flag must be an option of its subcommand's real argparse parser.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAMS = ("lerobot-policy-server", "lerobot-rollout", "lerobot-fleet")
GUIDE_TASK, GUIDE_PORT = "pick up the cube", "7447"
_FENCE = re.compile(r"^```(?:bash|sh|shell)\s*\n(.*?)^```", re.S | re.M)


def commands() -> list[tuple[str, str, list[str]]]:
    """(doc, program, argv after the program) for every command of ours in a fenced shell block."""
    out = []
    for doc in DOCS:
        for block in _FENCE.findall(doc.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                for part in line.split("&&"):
                    try:
                        words = shlex.split(part, comments=True)
                    except ValueError:
                        continue
                    if words and Path(words[0]).name in PROGRAMS:
                        out.append((doc.name, Path(words[0]).name, words[1:]))
    return out


def flags(argv: list[str]) -> list[tuple[str, str | None]]:
    out = []
    for w in argv:
        if w.startswith("--") and w != "--" and not w.startswith("--..."):
            name, eq, value = w.partition("=")
            out.append((name, value if eq else None))
    return out


def _hints(cls: type) -> dict[str, typing.Any]:
    import sys

    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


def _unwrap(t: typing.Any) -> typing.Any:
    args = [a for a in typing.get_args(t) if a is not type(None)]
    return (
        args[0]
        if typing.get_origin(t) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and args
        else t
    )


def resolve(cls: type, path: list[str], types: dict[str, str], prefix: str = "") -> str:
    """'' when `path` names a field of `cls` (descending into dataclasses and draccus choices), else why not."""
    import draccus

    if not path:
        return ""
    if isinstance(cls, type) and issubclass(cls, draccus.ChoiceRegistry) and prefix.rstrip(".") in types:
        cls = cls.get_choice_class(types[prefix.rstrip(".")])
    if not dataclasses.is_dataclass(cls):
        return ""  # a dict or list value: its contents are the value's business
    head, rest = path[0], path[1:]
    if head == "type" and issubclass(cls, draccus.ChoiceRegistry) and not rest:
        return ""
    names = {f.name for f in dataclasses.fields(cls)}
    if head not in names:
        if head == "path" and prefix == "policy.":
            return ""  # lerobot's --policy.path
        return f"{prefix}{head} is not a field of {cls.__name__}"
    return resolve(_unwrap(_hints(cls)[head]), rest, types, f"{prefix}{head}.")


def check_rollout(argv: list[str]) -> list[str]:
    from lerobot.rollout import RolloutConfig

    import lerobot_policy_remote.plugin as plugin

    plugin.register()
    given = flags(argv)
    types = {name[2:].removesuffix(".type"): v for name, v in given if name.endswith(".type") and v}
    problems = []
    for name, _ in given:
        if name in ("--help", "-h"):
            continue
        why = resolve(RolloutConfig, name[2:].split("."), types)
        if why:
            problems.append(why)
    return problems


def check_server(argv: list[str]) -> list[str]:
    import draccus

    from lerobot_policy_remote.server.manifest import Manifest
    from lerobot_policy_remote.server.manifest_args import endpoints_as_lists, split_manifest

    if any("..." in w or "<" in w for w in argv) or argv[:1] in (["--help"], ["-h"]):
        names = {f.name for f in dataclasses.fields(Manifest)} | {"manifest", "verbose"}
        return [n for n, _ in flags(argv) if n[2:].split(".")[0] not in names]
    _, rest = split_manifest([w for w in argv if w != "--verbose"])
    try:
        draccus.parse(Manifest, args=endpoints_as_lists(rest))
    except (SystemExit, Exception) as exc:  # draccus reports bad flags by exiting
        return [f"{' '.join(rest)}: {exc}"]
    return []


def check_fleet(argv: list[str]) -> list[str]:
    from lerobot_fleet.cli import build_parser, subcommand_options

    parser = build_parser()
    words = [w for w in argv if not w.startswith("-")]
    if not words or subcommand_options(parser, words[:1]) is None:
        return [] if any(w in ("--help", "-h") for w in argv) else [f"no subcommand in {argv}"]
    path = words[:2] if words[0] in ("pki", "rollout") and len(words) > 1 else words[:1]
    known = subcommand_options(parser, path)
    if known is None:
        return [f"no subcommand {' '.join(path)} in {argv}"]
    return [f"{words[0]} has no {n}" for n, _ in flags(argv) if n not in known]


CHECKS = {"lerobot-policy-server": check_server, "lerobot-rollout": check_rollout, "lerobot-fleet": check_fleet}


def test_the_docs_have_commands_for_every_program():
    found = {prog for _, prog, _ in commands()}
    assert found == set(PROGRAMS)


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_documented_command_parses(program):
    bad = []
    for doc, prog, argv in commands():
        if prog == program:
            bad += [f"{doc}: {p}" for p in CHECKS[prog](argv)]
    assert not bad, "\n".join(bad)


def test_walkthrough_commands_use_the_guides_task_and_port():
    """The by-hand commands (a local router, a task) use one task string and one port across README and docs."""
    for doc, prog, argv in commands():
        for name, value in flags(argv):
            if name in ("--task", "--default_task") and value and "<" not in value:
                assert value == GUIDE_TASK, f"{doc}: {prog} {name}={value!r} (the guide uses {GUIDE_TASK!r})"
            if value and "127.0.0.1:" in value:
                assert re.findall(r"127\.0\.0\.1:(\d+)", value) == [GUIDE_PORT] * len(
                    re.findall(r"127\.0\.0\.1:", value)
                ), f"{doc}: {prog} {name}={value!r} (the guide's router is on port {GUIDE_PORT})"
    manifest = (ROOT / "manifests" / "act-local.yaml").read_text()
    assert f'default_task: "{GUIDE_TASK}"' in manifest


def test_the_readme_says_how_long_the_suite_takes_as_testing_md_does():
    """The README's test command says how long it runs, in the same minutes as docs/testing.md's table."""
    readme = (ROOT / "README.md").read_text()
    after = readme[readme.index(".venv/bin/python -m pytest -q\n") :]
    said = re.search(r"takes about (\d+(?:\.\d+)?) minutes", after[:600])
    assert said, "README.md: say how long `pytest -q` takes, next to the command"
    row = next(
        line
        for line in (ROOT / "docs" / "testing.md").read_text().splitlines()
        if line.startswith("| `.venv/bin/python -m pytest -q` |")
    )
    assert f"about {said.group(1)} min" in row, row
