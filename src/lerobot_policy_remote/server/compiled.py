"""The compiled execution path of a flow-matching VLA (pi0, pi0.5, SmolVLA): graphs per batch bucket.

Why: lerobot's eager pass launches thousands of small kernels, and on a GPU launching them is most of a chunk's
time. `torch.compile` (inductor) fuses the model's regions, each traced once per bucket: the prefix embedding
(vision tower, prompt), the prefix's pass through the language model, and one denoising step (the Euler loop calls
the same step graph); on CUDA the whole pass, loop and guidance included, is then captured once per bucket as a
CUDA graph and replayed. Shapes are static so a bucket's graphs serve every robot and no request compiles: the batch
is padded to a bucket (1, 2, 4, ... up to `batching.max_batch`) with copies of its first row, the prompt to the
tokenizer's length, and the noise, the flow times and RTC's plan (prefixes, weights, max weights:
`rtc_guidance.plan_tensors`) are tensors.

The sampler stands in for the model's `sample_actions`, so lerobot's own `predict_action_chunk` and
`sample_actions` run unchanged around the compiled regions. Whatever the compiled path cannot serve (a batch size
with no graph, a call it was not built for, a graph that would need compiling again) is served by the eager
`sample_actions` and counted; it never fails a request.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .buckets import bucket_for

log = logging.getLogger("lerobot.policy_server")

# The inner model's methods compiled, those it has: the prefix embedding, one denoising step, and the prefix's pass
# through the language model (pi0 / pi0.5: `paligemma_with_expert`, SmolVLA: `vlm_with_expert`).
REGIONS = ("embed_prefix", "denoise_step", "paligemma_with_expert.forward", "vlm_with_expert.forward")
TOKEN_KEYS = (2, 3)  # sample_actions(images, img_masks, lang_tokens, lang_masks, ...): the prompt's positions


@dataclass
class EngineStats:
    """Which path serves, and what it did: `/metrics`, the status and the start line read these."""

    path: str = "eager"  # compiled | eager
    reason: str = ""  # why eager serves: "model.compile=off", "compile failed: ...", ...
    compiles: int = 0  # graphs torch compiled for this model (warm-up's included; 0 new ones after it)
    replays: int = 0  # passes served by a compiled graph (a CUDA graph replay on a GPU)
    fallbacks: int = 0  # passes served eagerly while the compiled path serves
    graphs: bool = False  # CUDA graphs captured (a GPU)
    bucket_seconds: dict[int, float] = field(default_factory=dict)  # bucket -> compile (+ capture) time at warm-up


def wants_compile(choice: str, device: str) -> bool:
    """`model.compile`: on, off, or auto (on for CUDA; off on the CPU, where compiling costs 30-50 s a bucket at start
    and ACT has no compiled path: docs/decisions.md, "A compiled pass per batch bucket")."""
    if choice == "on":
        return True
    return choice == "auto" and device.split(":")[0] == "cuda"


def compile_options(device: str) -> dict[str, bool]:
    """Inductor's options per device. On the CPU, its C++ wrapper: a graph's kernels build as one library rather than
    one per kernel, which takes about a third less CPU to compile (docs/decisions.md, "A compiled pass per batch
    bucket"); on CUDA, inductor's defaults."""
    return {"cpp_wrapper": True} if device.split(":")[0] == "cpu" else {}


def _unique_graphs() -> int:
    """Graphs dynamo has compiled in this process (its own counter; one model per server process)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class CompiledSampler:
    """Stands in for `model.sample_actions`: pads a call to its bucket and runs that bucket's compiled graph."""

    def __init__(
        self,
        torch: Any,
        model: Any,
        guidance: Any,
        *,
        device: str,
        buckets: tuple[int, ...],
        token_length: int | None,
        chunk: tuple[int, int],
        stats: EngineStats,
    ) -> None:
        self._torch = torch
        self._model = model
        self._eager: Callable[..., Any] = model.sample_actions
        self._guidance = guidance
        self._device = device
        self.buckets = buckets
        self._token_length = token_length
        self._chunk = chunk  # (steps, action dims) of the model-space noise
        self.stats = stats
        self._graphs = device.split(":")[0] == "cuda" and torch.cuda.is_available()
        # A region holds one graph per bucket: room for all of them, or dynamo would run the rest eagerly, unseen.
        dynamo_config = torch._dynamo.config
        dynamo_config.recompile_limit = max(int(dynamo_config.recompile_limit), 2 * len(buckets) + 8)
        # The regions compiled; the Euler loop, the guidance and the prefix's transformer pass stay lerobot's Python.
        options = compile_options(device)
        self._regions = {
            (owner, attr): torch.compile(getattr(owner, attr), dynamic=False, options=options)
            for owner, attr in (_region(model, name) for name in REGIONS)
            if owner is not None
        }
        self._family = sys.modules[type(model).__module__]
        self._stock_integrate = getattr(self._family, "euler_integrate", None)
        if self._stock_integrate is euler_integrate:  # another sampler of this process swapped it: restore lerobot's
            from lerobot.policies.common import flow_matching

            self._stock_integrate = flow_matching.euler_integrate
        self._ready: dict[int, Any] = {}  # bucket -> None (compiled) or its captured CUDA graph
        self._frozen = False  # after warm-up: a call that would compile is served eagerly instead
        self.compiling = False  # during warm-up: a bucket's first call compiles it
        self._warned: set[str] = set()
        self._pool: Any = None
        self._graphs_at_start = _unique_graphs()

    # ------------------------------------------------------------------ install
    def install(self) -> None:
        """Shadow the model's `sample_actions` with this sampler (the policy calls `self.model.sample_actions`), and
        give its family module the Euler loop a CUDA graph can hold (`euler_integrate`, same values)."""
        if self._stock_integrate is None:
            raise RuntimeError(f"{self._family.__name__} has no euler_integrate: its loop is not the one compiled here")
        setattr(self._family, "euler_integrate", euler_integrate)  # noqa: B010 (a module mypy cannot see into)
        self._model.sample_actions = self

    def uninstall(self) -> None:
        """Back to lerobot's own method and loop (a failed compile)."""
        self._model.__dict__.pop("sample_actions", None)
        if self._stock_integrate is not None:
            setattr(self._family, "euler_integrate", self._stock_integrate)  # noqa: B010

    @contextlib.contextmanager
    def _compiled_regions(self) -> Iterator[None]:
        """The model's regions are their compiled graphs for one pass (the eager fallback never sees them)."""
        for (owner, attr), fn in self._regions.items():
            setattr(owner, attr, fn)
        try:
            yield
        finally:
            for owner, attr in self._regions:
                owner.__dict__.pop(attr, None)

    # ------------------------------------------------------------------ padding
    def _pad_rows(self, value: Any, rows: int) -> Any:
        torch = self._torch
        if isinstance(value, list | tuple):
            return type(value)(self._pad_rows(v, rows) for v in value)
        if not isinstance(value, torch.Tensor) or value.ndim == 0 or value.shape[0] == rows:
            return value
        extra = value[:1].expand(rows - value.shape[0], *value.shape[1:])
        return torch.cat([value, extra], dim=0)

    def _pad_tokens(self, args: list[Any]) -> None:
        """The prompt to the tokenizer's length: pad ids 0 under a False mask (attention never reads them)."""
        length = self._token_length
        tokens, masks = (args[i] for i in TOKEN_KEYS)
        if length is None or tokens.shape[1] >= length:
            return
        pad = length - tokens.shape[1]
        torch = self._torch
        args[TOKEN_KEYS[0]] = torch.nn.functional.pad(tokens, (0, pad), value=0)
        args[TOKEN_KEYS[1]] = torch.nn.functional.pad(masks, (0, pad), value=False)

    def _inputs(self, args: tuple[Any, ...], noise: Any, bucket: int) -> tuple[tuple[Any, ...], Any, Any]:
        """(padded args, padded noise, the RTC plan as tensors for the bucket or None without guidance)."""
        padded = list(self._pad_rows(list(args), bucket))
        self._pad_tokens(padded)
        plan = None
        if self._guidance is not None:
            steps, dims = self._chunk
            plan = self._guidance.plan_tensors(self._guidance._plan, bucket, steps, dims, noise.device)
        return tuple(padded), self._pad_rows(noise, bucket), plan

    # ------------------------------------------------------------------ serving
    def __call__(self, *args: Any, noise: Any = None, **kwargs: Any) -> Any:
        rows = None if noise is None else int(noise.shape[0])
        bucket = None if rows is None else bucket_for(rows, self.buckets)
        if self.compiling and not kwargs and bucket is not None and bucket not in self._ready:
            self.compile_bucket(bucket, args, noise)  # warm-up: a compile error reaches the caller
        if kwargs or len(args) <= max(TOKEN_KEYS) or bucket is None or bucket not in self._ready:
            return self._fallback(args, noise, kwargs, "a call the compiled path has no graph for")
        assert rows is not None
        padded, padded_noise, plan = self._inputs(args, noise, bucket)
        try:
            out = self._replay(bucket, padded, padded_noise, plan)
        except Exception as exc:  # a graph that would recompile (frozen), a capture gone bad: eager serves it
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            return self._fallback(args, noise, kwargs, f"{type(exc).__name__}: {first}")
        self.stats.replays += 1
        self._count_compiles()
        return out[:rows]

    def _replay(self, bucket: int, args: tuple[Any, ...], noise: Any, plan: Any) -> Any:
        captured = self._ready[bucket]
        if captured is not None:
            return captured.replay(args, noise, plan)
        return self._call_compiled(args, noise, plan)

    def _call_compiled(self, args: tuple[Any, ...], noise: Any, plan: Any) -> Any:
        stance = self._torch.compiler.set_stance("fail_on_recompile") if self._frozen else contextlib.nullcontext()
        with self._bound(plan), self._compiled_regions(), stance:
            return self._eager(*args, noise=noise)

    def _bound(self, plan: Any) -> contextlib.AbstractContextManager[Any]:
        if plan is None or self._guidance is None:
            return contextlib.nullcontext()
        bound: contextlib.AbstractContextManager[Any] = self._guidance.bound(plan)
        return bound

    def _fallback(self, args: tuple[Any, ...], noise: Any, kwargs: dict[str, Any], why: str) -> Any:
        self.stats.fallbacks += 1
        if why not in self._warned and len(self._warned) < 8:
            self._warned.add(why)
            log.warning("compiled pass not used for one request (%s): served eagerly", why)
        return self._eager(*args, noise=noise, **kwargs)

    def _count_compiles(self) -> None:
        self.stats.compiles = _unique_graphs() - self._graphs_at_start

    # ------------------------------------------------------------------ warm-up
    def compile_bucket(self, bucket: int, args: tuple[Any, ...], noise: Any) -> float:
        """Compile (and on a GPU capture) one bucket from a sample call's inputs; the seconds it took. Raises when the
        compile itself fails (the caller then serves eagerly)."""
        t0 = time.perf_counter()
        padded, padded_noise, plan = self._inputs(args, noise, bucket)
        for _ in range(2):  # the first call compiles; the second checks that the graph is reused
            self._call_compiled(padded, padded_noise, plan)
        self._ready[bucket] = None
        if self._graphs:
            try:
                self._ready[bucket] = self._capture(padded, padded_noise, plan)
                self.stats.graphs = True
            except Exception as exc:  # the compiled graph still serves this bucket, one launch per kernel
                log.warning(
                    "CUDA graph capture failed for batch %d (%s): serving it compiled without a graph", bucket, exc
                )
        self._count_compiles()
        seconds = time.perf_counter() - t0
        self.stats.bucket_seconds[bucket] = seconds
        return seconds

    def freeze(self) -> None:
        """Warm-up is over: from now on a call that would compile is served eagerly, never compiled mid-serving."""
        self.compiling = False
        self._frozen = True

    def _capture(self, args: tuple[Any, ...], noise: Any, plan: Any) -> CapturedPass:
        captured = CapturedPass(self._torch, self._call_compiled, args, noise, plan, self._pool)
        self._pool = captured.pool
        return captured


class CapturedPass:
    """One bucket's compiled pass captured as a CUDA graph over static input buffers: a replay copies the inputs in,
    replays, and returns a copy of the output (the next replay overwrites it)."""

    def __init__(
        self, torch: Any, call: Callable[[Any, Any, Any], Any], args: Any, noise: Any, plan: Any, pool: Any
    ) -> None:
        from torch.utils._pytree import tree_flatten

        self._torch = torch
        leaves, self._spec = tree_flatten((args, noise, plan))
        self._static = [leaf.clone() if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        static_args, static_noise, static_plan = self._unflatten()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                call(static_args, static_noise, static_plan)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self._out = call(static_args, static_noise, static_plan)
        self.pool = self.graph.pool()

    def _unflatten(self) -> Any:
        from torch.utils._pytree import tree_unflatten

        return tree_unflatten(self._static, self._spec)

    def replay(self, args: Any, noise: Any, plan: Any) -> Any:
        from torch.utils._pytree import tree_flatten

        leaves, _ = tree_flatten((args, noise, plan))
        for static, leaf in zip(self._static, leaves, strict=True):
            if isinstance(static, self._torch.Tensor):
                static.copy_(leaf, non_blocking=True)
        self.graph.replay()
        return self._out.clone()


def _region(model: Any, dotted: str) -> tuple[Any, str]:
    """(the object that owns the method, its name), or (None, name) when this family has no such part."""
    *path, attr = dotted.split(".")
    owner = model
    for part in path:
        owner = getattr(owner, part, None)
    return (owner, attr) if owner is not None and callable(getattr(owner, attr, None)) else (None, attr)


def euler_integrate(
    denoise_fn: Callable[[Any, Any], Any],
    noise: Any,
    num_steps: int,
    *,
    rtc_processor: Any = None,
    rtc_enabled: bool = False,
    inference_delay: int | None = None,
    prev_chunk_left_over: Any = None,
    execution_horizon: int | None = None,
) -> Any:
    """lerobot 0.6.1's forward-Euler loop (`policies.common.flow_matching.euler_integrate`, same signature and
    values) with each step's time filled on the device (`torch.full`) rather than copied from the host, which a CUDA
    graph cannot hold; the step function reads it as an input, so one step graph serves every step."""
    import torch

    bsize, device = noise.shape[0], noise.device
    dt = -1.0 / num_steps
    x_t = noise
    for step in range(num_steps):
        time_value = 1.0 + step * dt
        time_tensor = torch.full((bsize,), time_value, dtype=torch.float32, device=device)

        def denoise_step_partial_call(input_x_t: Any, current_timestep: Any = time_tensor) -> Any:
            return denoise_fn(input_x_t, current_timestep)

        if rtc_enabled:
            v_t = rtc_processor.denoise_step(
                x_t=x_t,
                prev_chunk_left_over=prev_chunk_left_over,
                inference_delay=inference_delay,
                time=time_value,
                original_denoise_step_partial=denoise_step_partial_call,
                execution_horizon=execution_horizon,
            )
        else:
            v_t = denoise_step_partial_call(x_t)
        x_t = x_t + dt * v_t
        if rtc_processor is not None and rtc_processor.is_debug_enabled():
            rtc_processor.track(time=time_value, x_t=x_t, v_t=v_t)
    return x_t
