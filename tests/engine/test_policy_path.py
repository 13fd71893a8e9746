"""A remote robot whose `--policy.path` lerobot cannot read ends with one line naming the fix, no traceback.

lerobot reads the policy's config.json while draccus parses the command line (`RolloutConfig.__post_init__`);
without the plugin's help a typo there is a 52-line draccus / huggingface traceback. The slow tests run the real
`lerobot-rollout` (a path that does not exist, a directory without config.json) and time it from launch to exit;
the units check the words for each kind of failure and that the wrapper leaves other failures alone.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lerobot_policy_remote.engine import hook
from lerobot_policy_remote.engine.startup import PREFIX, RemoteStartupError, policy_path_failed
from lerobot_policy_remote.testing.procs import Proc, rollout_argv

HINT = "(LOG_LEVEL=DEBUG prints the traceback; `lerobot-fleet doctor` checks the whole setup)"
SAME = (
    "the robot reads only its config.json (no weights): pass the checkpoint directory or hub repo id the server serves"
)
LAUNCH_TO_EXIT_S = 20.0  # lerobot's own imports take 9-15 s of it on a loaded 2-core machine


def run(path: str) -> tuple[int, list[str], float]:
    t0 = time.monotonic()
    p = Proc(rollout_argv(path, "pick up the cube", "tcp/127.0.0.1:1"), name="rollout", max_seconds=120)
    rc = p.wait(110)
    took = time.monotonic() - t0
    p.wait_for("(LOG_LEVEL=DEBUG", timeout=10)  # the reader has seen the end of the output
    return rc, [x for x in p.output().splitlines() if x.strip()], took


@pytest.mark.slow
def test_a_path_that_does_not_exist_is_one_line(tmp_path):
    rc, lines, took = run(str(tmp_path / "no_such_ckpt"))
    assert rc == 1
    assert lines == [
        f"lerobot-rollout: {PREFIX}--policy.path={tmp_path / 'no_such_ckpt'}: "
        f"no directory {tmp_path / 'no_such_ckpt'} on "
        f"this machine, and it is not a hub repo id like 'org/name'; {SAME} (its model.repo_or_path; "
        "`lerobot-fleet status` lists what the router offers)",
        HINT,
    ], lines
    assert took <= LAUNCH_TO_EXIT_S, f"{took:.1f}s from launch to exit"


@pytest.mark.slow
def test_a_directory_without_config_json_is_one_line(tmp_path):
    rc, lines, took = run(str(tmp_path))
    assert rc == 1 and len(lines) == 2 and lines[1] == HINT, lines
    assert (
        f"--policy.path={tmp_path}: {tmp_path} is a directory without config.json: point it at the pretrained_model"
        in lines[0]
    )
    assert took <= LAUNCH_TO_EXIT_S, f"{took:.1f}s from launch to exit"


class HFValidationError(ValueError):
    pass


class LocalEntryNotFoundError(FileNotFoundError):
    pass


class RepositoryNotFoundError(OSError):
    pass


@pytest.mark.parametrize(
    "path, exc, words",
    [
        (
            "/no/ckpt",
            HFValidationError("Repo id must be in the form"),
            "no directory /no/ckpt on this machine, and it is not a hub repo id",
        ),
        (
            "org/model_typo",
            LocalEntryNotFoundError("cannot find the requested files"),
            "could not be fetched from the hub (no network",
        ),
        ("org/model_typo", RepositoryNotFoundError("404"), "the hub has no config.json for org/model_typo"),
        (
            "org/model",
            ValueError("bad type in config.json\nmore"),
            "lerobot could not read the policy config at org/model (ValueError: bad type",
        ),
    ],
)
def test_each_kind_of_failure_has_its_words(path, exc, words):
    msg = str(policy_path_failed(path, exc))
    assert msg.startswith(f"{PREFIX}--policy.path={path}: ") and words in msg and SAME in msg and "\n" not in msg


def test_the_file_case_names_the_directory(tmp_path):
    f = tmp_path / "config.json"
    f.write_text("{}")
    assert f"{f} is a file: pass the directory that holds the policy's config.json" in str(
        policy_path_failed(str(f), OSError())
    )


def test_the_wrapper_turns_only_a_config_failure_into_the_message(tmp_path):
    from lerobot.configs.policies import PreTrainedConfig

    original = PreTrainedConfig.__dict__["from_pretrained"]

    def parse(path: str) -> None:  # what draccus does around RolloutConfig.__post_init__
        try:
            PreTrainedConfig.from_pretrained(path)
        except Exception as e:
            raise RuntimeError("Couldn't instantiate class RolloutConfig using the given arguments.") from e

    with pytest.raises(RemoteStartupError, match="no directory"), hook.policy_path_errors(True):
        parse(str(tmp_path / "missing"))
    with pytest.raises(KeyError), hook.policy_path_errors(True):
        raise KeyError("another failure is left alone")
    with pytest.raises(RuntimeError, match="Couldn't instantiate"), hook.policy_path_errors(False):
        parse(str(tmp_path / "missing"))  # not a remote rollout: lerobot's own error
    assert PreTrainedConfig.__dict__["from_pretrained"] is original


def test_only_remote_rollouts_are_wrapped():
    assert hook.remote_rollout(["--robot.type=x", "--inference.type=remote"])
    assert hook.remote_rollout(["--inference.type", "remote"])
    assert not hook.remote_rollout(["--inference.type=sync"]) and not hook.remote_rollout([])


def test_a_real_checkpoint_still_parses(tmp_path):
    from lerobot.configs.policies import PreTrainedConfig

    from lerobot_policy_remote.testing.policies import save_tiny_act

    ckpt = save_tiny_act(tmp_path / "act")
    with hook.policy_path_errors(True):
        assert PreTrainedConfig.from_pretrained(str(ckpt)).type == "act"
    assert Path(ckpt, "config.json").is_file()
