"""Make stock `build_rollout_context` weightless for `--inference.type=remote` (and only for it).

lerobot 0.6.1 loads weights (`_load_pretrained_policy`), builds policy processors
(`make_pre_post_processors`) and the engine (`create_inference_engine`) inside one function. For a
remote config we run that same function with those three module globals swapped for the duration
of the call, so every robot-derived step (hardware, features, action-key order, camera pre-flight,
dataset) stays stock. Other configs go straight to the original.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from copy import copy
from typing import Any

logger = logging.getLogger(__name__)

_HOOK_POINTS = (
    "build_rollout_context",
    "_load_pretrained_policy",
    "make_pre_post_processors",
    "create_inference_engine",
)
_lock = threading.Lock()


class WeightlessPolicy:
    """Stands in for the policy object: config only, no parameters, no device."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.type = config.type
        self.name = config.type

    def to(self, *_a: Any, **_k: Any) -> WeightlessPolicy:
        return self

    def eval(self) -> WeightlessPolicy:
        return self

    def reset(self) -> None:
        pass


def check_hook_points() -> Any:
    """Fail loudly when lerobot changed shape under us."""
    import lerobot.rollout.context as context

    missing = [name for name in _HOOK_POINTS if not hasattr(context, name)]
    if missing:
        import lerobot

        raise ImportError(
            f"lerobot_policy_remote cannot hook lerobot {getattr(lerobot, '__version__', '?')}: "
            f"lerobot.rollout.context lacks {missing}. This package supports lerobot>=0.6.1,<0.7."
        )
    return context


def install() -> None:
    """Wrap build_rollout_context and rebind it wherever it was imported by name."""
    context = check_hook_points()
    from .startup import install_excepthook

    install_excepthook()  # a remote start failure ends lerobot-rollout with its advice, not a traceback
    from . import keypress

    keypress.install()  # strategy keys reachable by scripted sources (sim_leader) and operator resets
    if getattr(context.build_rollout_context, "_remote_wrapped", False):
        return
    original = context.build_rollout_context

    def build_rollout_context(cfg: Any, shutdown_event: Any, *args: Any, **kwargs: Any) -> Any:
        from .config import RemoteInferenceConfig

        if not isinstance(cfg.inference, RemoteInferenceConfig):
            return original(cfg, shutdown_event, *args, **kwargs)
        cfg = _weightless_cfg(cfg)
        with _swapped(context, cfg):
            ctx = original(cfg, shutdown_event, *args, **kwargs)
        engine = getattr(getattr(ctx, "policy", None), "inference", None)
        hardware = getattr(ctx, "hardware", None)
        if engine is not None and hardware is not None:
            _built.append(engine)

            def never_moved() -> None:  # a failed start: nothing to return from (lerobot would spend 3 s driving back)
                hardware.initial_position = None

            engine.on_start_failed = never_moved
        dataset = getattr(getattr(ctx, "data", None), "dataset", None)
        if engine is not None and dataset is not None:
            from . import recording

            recording.attach(dataset, engine, getattr(cfg.strategy, "type", ""))
        return ctx

    build_rollout_context._remote_wrapped = True  # type: ignore[attr-defined]
    build_rollout_context.__wrapped__ = original  # type: ignore[attr-defined]
    context.build_rollout_context = build_rollout_context
    for modname in ("lerobot.rollout", "lerobot.scripts.lerobot_rollout"):
        mod: Any = sys.modules.get(modname)
        if mod is not None and hasattr(mod, "build_rollout_context"):
            mod.build_rollout_context = build_rollout_context
    wrap_rollout(sys.modules.get("lerobot.scripts.lerobot_rollout"))


_built: list[Any] = []  # the remote engines this process built (one per rollout)


def wrap_rollout(script: Any) -> None:
    """`lerobot-rollout` ends with status 1 and the reason when a remote robot executed nothing.

    lerobot's `main()` calls the module's `rollout` by name after loading plugins, so rebinding it here is
    enough; a rollout that executed at least one remote action is untouched. Public so a caller (and the tests)
    can wrap a rollout module of its own the way `install` wraps lerobot's.
    """
    if script is None or not hasattr(script, "rollout") or getattr(script.rollout, "_remote_wrapped", False):
        return
    original = script.rollout
    lerobots_script = getattr(script, "__name__", "") == "lerobot.scripts.lerobot_rollout"

    def rollout(*args: Any, **kwargs: Any) -> Any:
        remote = remote_rollout(sys.argv[1:])
        code = 1  # what the process exits with if this raises (the excepthook prints the reason)
        try:
            with policy_path_errors(remote):
                result = original(*args, **kwargs)
            idle = [e for e in _built if e.executed_count == 0]
            if idle:
                print(
                    f"\nlerobot-rollout: the robot executed no remote action: {idle[-1].why_nothing_executed()}",
                    file=sys.stderr,
                    flush=True,
                )
                raise SystemExit(1)
            code = 0
            return result
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            raise
        finally:
            if remote and lerobots_script and program_is_lerobot_rollout():
                _bound_exit(code)

    rollout._remote_wrapped = True  # type: ignore[attr-defined]
    script.rollout = rollout


def program_is_lerobot_rollout() -> bool:
    """Whether this process is `lerobot-rollout` (its console script, or `python -m lerobot.scripts.lerobot_rollout`),
    which ends when the rollout does: only then may a watchdog end the process. A program that calls lerobot's
    rollout in-process (a test asking for `--help`) goes on after it."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return (
        os.path.basename(getattr(main, "__file__", None) or "") == "lerobot-rollout"
        or getattr(spec, "name", "") == "lerobot.scripts.lerobot_rollout"
    )


EXIT_GRACE_S = 10.0  # after "Rollout finished": a normal exit takes 1.5-5 s on a busy 2-core machine


def _bound_exit(code: int) -> None:
    """The rollout has ended ("Rollout finished" is logged): nothing may keep the process alive.

    Zenoh runs each callback a session declared on a thread that is not a daemon and ends only when that session
    closes: one session left open keeps the interpreter waiting at exit for ever. The engines' links are closed
    again (idempotent; it catches a session a late worker opened), and a daemon watchdog ends the process with
    `code` if it is still here EXIT_GRACE_S later, naming the threads that held it."""
    for engine in _built:
        transport = getattr(engine, "transport", None)
        if transport is None:
            continue
        try:
            transport.close()
        except Exception as exc:  # closing twice, or a session zenoh already closed: nothing left to release
            logger.debug("closing the remote link after the rollout: %s", exc)
    threading.Thread(target=_exit_watchdog, args=(code,), name="exit-watchdog", daemon=True).start()


def _exit_watchdog(code: int, grace_s: float | None = None) -> None:
    time.sleep(EXIT_GRACE_S if grace_s is None else grace_s)
    held = sorted(
        t.name for t in threading.enumerate() if t.is_alive() and not t.daemon and t is not threading.main_thread()
    )
    print(
        f"lerobot-rollout: still running {EXIT_GRACE_S if grace_s is None else grace_s:g} s after the rollout ended "
        f"(kept alive by thread(s): {', '.join(held) or 'none left'}): exiting now with status {code}",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os._exit(code)


def remote_rollout(argv: list[str]) -> bool:
    """`--inference.type=remote` on the command line (lerobot parses the config only inside `rollout`).

    Public: the one rule for "this process is a remote rollout", which the tests check on its own."""
    return any(
        a == "--inference.type=remote" or (a == "--inference.type" and nxt == "remote")
        for a, nxt in zip(argv, [*argv[1:], ""], strict=False)
    )


@contextmanager
def policy_path_errors(remote: bool) -> Iterator[None]:
    """A remote robot whose `--policy.path` lerobot cannot read ends with one line naming the fix, not lerobot's and
    draccus' traceback: lerobot reads the config inside `RolloutConfig.__post_init__` (draccus wraps whatever it
    raises in a ParsingError), so `PreTrainedConfig.from_pretrained` is wrapped for the parse and its failure is
    re-raised here as the RemoteStartupError the excepthook prints (startup.py). Public so the wrapping can be
    checked around a parse on its own, without running a rollout."""
    if not remote:
        yield
        return
    from lerobot.configs.policies import PreTrainedConfig

    from .startup import RemoteStartupError, causes, policy_path_failed

    original = PreTrainedConfig.__dict__["from_pretrained"]
    quiet = logging.getLogger("lerobot.configs.policies")  # its own "config.json not found" ERROR line: said below

    def from_pretrained(cls: Any, pretrained_name_or_path: Any, *args: Any, **kwargs: Any) -> Any:
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            return original.__func__(cls, pretrained_name_or_path, *args, **kwargs)
        except Exception as exc:
            raise policy_path_failed(str(pretrained_name_or_path), exc) from exc
        finally:
            quiet.setLevel(level)

    PreTrainedConfig.from_pretrained = classmethod(from_pretrained)
    try:
        yield
    except Exception as exc:
        refused = next((e for e in causes(exc) if isinstance(e, RemoteStartupError)), None)
        if refused is None:
            raise
        raise refused from exc
    finally:
        PreTrainedConfig.from_pretrained = original


def _weightless_cfg(cfg: Any) -> Any:
    if cfg.use_torch_compile:
        logger.warning("--use_torch_compile is ignored with --inference.type=remote (the robot runs no model)")
        cfg = copy(cfg)
        cfg.use_torch_compile = False
    if any(a.startswith("--device") for a in sys.argv[1:]):
        logger.warning("--device is ignored with --inference.type=remote (the robot loads no weights)")
    return cfg


@contextmanager
def _swapped(context: Any, cfg: Any) -> Iterator[None]:
    from .recording import DatasetFactory
    from .remote import RemoteInferenceEngine

    def load_policy(policy_config: Any) -> WeightlessPolicy:
        logger.info(
            "Remote inference: no weights loaded on the robot (policy type %s, config only)", policy_config.type
        )
        return WeightlessPolicy(policy_config)

    def no_processors(*_a: Any, **_k: Any) -> tuple[None, None]:
        return None, None

    def make_engine(
        config: Any,
        *,
        robot_wrapper: Any,
        hw_features: dict[str, Any],
        ordered_action_keys: list[str],
        task: str,
        fps: float,
        shutdown_event: Any = None,
        **_ignored: Any,
    ) -> RemoteInferenceEngine:
        model_id = config.service_model_id or str(cfg.policy.pretrained_path)
        return RemoteInferenceEngine(
            config,
            hw_features=hw_features,
            ordered_action_keys=ordered_action_keys,
            task=cfg.task or task,
            fps=fps,
            model_id=model_id,
            policy_type=cfg.policy.type,
            robot_type=robot_wrapper.robot_type,
            shutdown_event=shutdown_event,
            rename_map=dict(cfg.rename_map or {}),
        )

    with _lock:
        saved = {name: getattr(context, name) for name in (*_HOOK_POINTS[1:], "LeRobotDataset")}
        context.LeRobotDataset = DatasetFactory(saved["LeRobotDataset"])  # adds `remote.degraded`
        context._load_pretrained_policy = load_policy
        context.make_pre_post_processors = no_processors
        context.create_inference_engine = make_engine
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(context, name, value)
