"""``AutoTuner``: pick the fastest config of a kernel factory (TileLang's API; ``@autotune``, in
``autotune_decorator``, drives it).

Example::

    import tile.lang as tilelang
    from tile.lang.autotuner import autotune

    @autotune(configs=[{"block_M": 64, "block_N": 64}, {"block_M": 128, "block_N": 128}],
              ref_prog=lambda a, b: a @ b)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=64, block_N=64):
        ...

    kernel = matmul(1024, 1024, 1024)      # tunes once per argument set, returns the best kernel
    print(kernel.config, kernel.latency)   # the winning config, its median time in ms

One run: the candidates are compiled in parallel (``tuning_pool``, or on a Ray cluster),
each compiled one is checked against ``ref_prog`` and timed on its device
(``tuning_measure``), candidates that fail to compile, time out or disagree with the
reference are skipped and listed in ``AutotuneResult.skipped``, and the winner is stored
in the tuning cache (``tuning_cache``) so the next run with the same program, arguments,
target and device returns it without benchmarking. ``TILE_AUTOTUNE`` (``on``, ``off``,
``force``, ``functional``) and ``TILE_AUTOTUNE_EXECUTOR`` (``local``, ``ray``) steer it.

``warmup`` and ``rep`` are time budgets in milliseconds per candidate (as in
``Profiler.do_bench``), with at least one warm-up and three timed calls; ``timeout`` is
seconds per candidate, for its compile and for one call.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from .. import env
from . import tuning_cache
from .arguments import param_specs
from .callsite import call_site
from .eager import EagerKernel
from .jit import JITKernel, _JitFactory, _pick_target, compile
from .profiler import TensorSupplyType
from .tuning_measure import (
    COMPILE_FAILED,
    EARLY_STOP_FACTOR,
    HOPELESS,
    OK,
    TIMED_OUT,
    Budget,
    CheckSpec,
    Inputs,
    Outcome,
    check,
    checked,
    measure,
    reference_latency,
)
from .tuning_pool import TIMEOUT, compile_in_pool, worker_count
from .tuning_progress import Progress
from .tuning_results import (
    AutotuneConfigError,
    AutotuneError,
    AutotuneInputError,
    AutotuneResult,
    EmulatedTimingError,
    NoValidConfigError,
    SkippedConfig,
    _captured_inputs,
)

logger = logging.getLogger("tile.lang.autotuner")

PASS_CONFIGS_KEY = "pass_configs"
"""A config may carry its own pass configs under this key (TileLang's reserved name)."""

MODES = ("on", "off", "force", "functional")
EXECUTORS = ("local", "ray")


@dataclasses.dataclass
class _Plan:
    """How to build the kernel of one config: the factory, its fixed arguments, compile options."""

    factory: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out_idx: Any
    target: Any
    options: dict[str, Any]

    def elaborate(self, config: Mapping[str, Any]) -> Any:
        values = {k: v for k, v in config.items() if k != PASS_CONFIGS_KEY}
        return self.factory(*self.args, **{**self.kwargs, **values})

    def compile(self, config: Mapping[str, Any]) -> Any:
        options = self.options_for(config)
        return compile(self.elaborate(config), out_idx=self.out_idx, target=self.target, **options)

    def options_for(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The compile options, with the config's own pass configs over the others."""
        options = dict(self.options)
        extra = config.get(PASS_CONFIGS_KEY)
        if extra:
            options[PASS_CONFIGS_KEY] = {**(options.get(PASS_CONFIGS_KEY) or {}), **extra}
        return options


RETURN_KERNEL = "__return_kernel"
"""The keyword TileLang's ``@autotune`` calls take to return the kernel instead of running it."""

_COMPILE_ONLY_ARGS = ("execution_backend", "target_host", "verbose")
"""TileLang compile arguments tile accepts and has no use for (one execution path, no host target)."""


class AutoTuner:
    """Tune a kernel factory over configs (TileLang's programmatic form).

    Example::

        result = (AutoTuner.from_kernel(kernel=matmul_factory, configs=configs)
                  .set_compile_args(out_idx=[-1], target="cpu")
                  .set_profile_args(ref_prog=lambda a, b: a @ b)
                  .run(warmup=25, rep=100, timeout=60))
        c = result.kernel(a, b)
    """

    _memory_cache: ClassVar[dict[str, AutotuneResult]] = {}
    _memory_lock = threading.Lock()

    def __init__(self, fn: Callable[..., Any], configs: Any) -> None:
        self._eager = fn if isinstance(fn, EagerKernel) else None
        if isinstance(fn, _JitFactory):  # a @tilelang.jit factory: its compile arguments are the defaults
            self.fn: Callable[..., Any] = fn.factory
            self.compile_args: dict[str, Any] = {"out_idx": fn.out_idx, "target": fn.target, **fn.options}
        elif isinstance(fn, EagerKernel):  # an eager kernel, tuned for the arguments of one call
            self.fn = fn.fn
            self.compile_args = {"out_idx": None, "target": fn.target, **fn.options}
        else:
            self.fn = fn
            self.compile_args = {"out_idx": None, "target": "auto"}
        self.configs = configs
        self.profile_args: dict[str, Any] = {}
        self.check_spec = CheckSpec()
        self._fixed_args: tuple[Any, ...] = ()
        self._fixed_kwargs: dict[str, Any] = {}
        self._signature: Any = None
        self._first_func: Any = None  # the kernel at the first config that elaborates (run() sets it)

    @classmethod
    def from_kernel(cls, kernel: Callable[..., Any], configs: Any) -> AutoTuner:
        """A tuner for ``kernel``, a function from a config's keyword arguments to a ``PrimFunc``
        (or an eager ``@tilelang.jit`` kernel: then ``set_kernel_parameters`` gives the call's
        arguments, tensors included, or ``compile()``'s keyword arguments)."""
        return cls(kernel, configs)

    def set_compile_args(
        self,
        out_idx: int | Sequence[int] | None = None,
        target: Any = "auto",
        execution_backend: str | None = None,
        target_host: Any = None,
        verbose: bool | None = None,
        pass_configs: Mapping[str, Any] | None = None,
    ) -> AutoTuner:
        """How candidates are compiled: ``out_idx``, ``target`` and ``pass_configs`` as for
        ``tile.lang.compile``. ``execution_backend``, ``target_host`` and ``verbose`` are accepted
        for TileLang programs and have no effect."""
        del execution_backend, target_host, verbose
        self.compile_args = {"out_idx": out_idx, "target": target}
        if pass_configs:
            self.compile_args[PASS_CONFIGS_KEY] = dict(pass_configs)
        return self

    def set_profile_args(
        self,
        warmup: float = 25,
        rep: float = 100,
        timeout: float = 30,
        supply_type: Any = TensorSupplyType.Auto,
        ref_prog: Callable[..., Any] | None = None,
        supply_prog: Callable[..., Any] | None = None,
        rtol: float = 1e-2,
        atol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
        skip_check: bool = False,
        manual_check_prog: Callable[..., Any] | None = None,
        cache_input_tensors: bool = False,
        backend: str = "event",
    ) -> AutoTuner:
        """How candidates are fed, checked and timed (TileLang's arguments; ``backend`` is
        accepted and the device's own timer is used: host clock on a CPU, events on a GPU).

        ``supply_prog(params)`` gets the kernel's input parameters and returns its inputs;
        ``ref_prog(*inputs)`` returns the expected outputs; ``manual_check_prog(outs, refs)``
        raises when they disagree (instead of the ``rtol``/``atol`` comparison).
        """
        del backend
        self.profile_args = {"warmup": warmup, "rep": rep, "timeout": timeout}
        self.check_spec = CheckSpec(
            supply_type=supply_type or TensorSupplyType.Auto,
            ref_prog=ref_prog,
            supply_prog=supply_prog,
            rtol=rtol,
            atol=atol,
            max_mismatched_ratio=max_mismatched_ratio,
            skip_check=skip_check,
            manual_check_prog=manual_check_prog,
            cache_input_tensors=cache_input_tensors,
        )
        return self

    def set_kernel_parameters(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], signature: Any = None
    ) -> AutoTuner:
        """Fix the factory's non-tuned arguments (what ``@autotune`` does with the call's arguments)."""
        self._fixed_args, self._fixed_kwargs = tuple(args), dict(kwargs)
        self._signature = signature if signature is not None else [list(args), dict(kwargs)]
        return self

    # ------------------------------------------------------------------ run

    def _configs(self) -> list[dict[str, Any]]:
        configs = self.configs
        if callable(configs):
            configs = _call_configs(configs, self._fixed_args, self._fixed_kwargs)
        if isinstance(configs, Mapping):
            configs = [configs]
        configs = [dict(c) for c in configs or ()]
        name = getattr(self.fn, "__name__", "kernel")
        if not configs:
            raise AutotuneConfigError(
                f"no configs to tune {name} over",
                hint="pass configs=[{...}, ...] or a function returning that list",
                location=call_site(),
            )
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return configs
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for config in configs:
            unknown = sorted(k for k in config if k not in params and k != PASS_CONFIGS_KEY)
            if unknown and not takes_any:
                raise AutotuneConfigError(
                    f"config {config} names {', '.join(unknown)}, which {name} has no parameter for",
                    hint=f"config keys must be parameters of {name}: {', '.join(params)}",
                    location=call_site(),
                )
        return configs

    def _plan(self) -> _Plan:
        options = {k: v for k, v in self.compile_args.items() if k not in ("out_idx", "target")}
        if self._eager is not None:
            from .tuning_eager import EagerPlan

            return EagerPlan.for_call(
                self._eager, self._fixed_args, self._fixed_kwargs, self.compile_args.get("target"), options
            )
        return _Plan(
            self.fn,
            self._fixed_args,
            self._fixed_kwargs,
            self.compile_args.get("out_idx"),
            self.compile_args.get("target", "auto"),
            options,
        )

    def run(
        self,
        warmup: float | None = None,
        rep: float | None = None,
        timeout: float | None = None,
        *,
        executor: str | None = None,
        early_stop: bool = True,
        early_stop_factor: float = EARLY_STOP_FACTOR,
        functional: bool | None = None,
        **_tilelang_options: Any,
    ) -> AutotuneResult:
        """Tune and return the best kernel (``AutotuneResult``).

        ``warmup``/``rep`` are ms budgets per candidate, ``timeout`` seconds per candidate
        (defaults: the profile arguments, else 25 / 100 / 30). ``executor`` is ``"local"``
        or ``"ray"`` (default ``TILE_AUTOTUNE_EXECUTOR``). ``early_stop`` skips timing a
        candidate whose first calls already take ``early_stop_factor`` times the best so
        far (on by default, where TileLang's is off: such a candidate cannot win, and
        timing it in full is most of a slow tuning run). The local executor checks every
        candidate first and then times them in the order of their check's call, fastest
        first, so that the best is known early; CPU candidates that compiled to the same
        machine code are timed once. ``functional=True`` (or
        ``TILE_AUTOTUNE=functional``) times nothing: the first config that compiles and
        passes the check wins, as under ``TILE_DEVICE=emu``.
        TileLang's other ``run`` options (``use_pipeline``, ...) are accepted and ignored.
        """
        mode = env.AUTOTUNE.get().strip().lower() or "on"
        if mode not in MODES:
            raise AutotuneError(
                f"{env.AUTOTUNE.name}={mode!r} is not a mode", hint=f"set it to one of {', '.join(MODES)}"
            )
        chosen = executor or env.AUTOTUNE_EXECUTOR.get().strip().lower() or "local"
        if chosen not in EXECUTORS:
            raise AutotuneError(
                f"autotune executor {chosen!r} is unknown",
                hint=f"use one of {', '.join(EXECUTORS)} ({env.AUTOTUNE_EXECUTOR.name})",
            )
        warmup = float(self.profile_args.get("warmup", 25) if warmup is None else warmup)
        rep = float(self.profile_args.get("rep", 100) if rep is None else rep)
        timeout = float(self.profile_args.get("timeout", 30) if timeout is None else timeout)
        if timeout <= 0:
            timeout = math.inf
        budget = Budget(warmup, rep, timeout)
        configs = self._configs()
        plan = self._plan()
        spec = dataclasses.replace(self.check_spec, inputs=_captured_inputs())
        target, manifest = _pick_target(plan.target)
        caps = manifest.capabilities(target)
        functional = bool(functional) or mode == "functional"
        key = self._key(plan, configs, target, manifest, caps)

        if mode != "force" and key is not None:
            with self._memory_lock:
                remembered = self._memory_cache.get(key)
            if remembered is not None:
                return remembered
            entry = tuning_cache.load(key, configs)
            if entry is not None:
                result = self._from_entry(plan, configs, entry)
                if result is not None:
                    return self._remember(key, result)
        if mode == "off":
            return self._remember(key, self._first_valid(plan, configs))
        self._require_inputs(plan, spec)
        if caps.emulated and not functional:
            raise EmulatedTimingError(
                f"cannot autotune {getattr(self.fn, '__name__', 'the kernel')} for {caps.device_name}: "
                "its kernels run on the CPU emulator (TILE_DEVICE=emu), whose timings say nothing "
                "about the GPU",
                hint=f"tune on the GPU; or pick the first config that compiles and passes the check "
                f"with run(functional=True) / {env.AUTOTUNE.name}=functional; or "
                f"{env.AUTOTUNE.name}=off for the first config",
                location=call_site(),
            )
        if functional:
            return self._first_valid(plan, configs, spec)
        if chosen == "ray":
            from .tuning_ray import tune_on_ray

            outcomes = tune_on_ray(
                plan,
                configs,
                spec,
                budget,
                early_stop_factor=early_stop_factor if early_stop else None,
                gpu=caps.warp_size > 1 and not caps.emulated,
            )
            result = self._finish_remote(plan, configs, spec, outcomes, budget)
        else:
            result = self._tune_here(
                plan, configs, spec, budget, early_stop_factor if early_stop else None, manifest
            )
        if key is not None:
            tuning_cache.store(
                key,
                {
                    "best_index": configs.index(result.config) if result.config in configs else 0,
                    "config": tuning_cache.plain(result.config),
                    "latency": result.latency,
                    "ref_latency": result.ref_latency,
                    "latencies": {str(i): t for i, t in result.latencies.items()},
                    "skipped": [
                        dataclasses.asdict(s) | {"config": tuning_cache.plain(s.config)}
                        for s in result.skipped
                    ],
                    "device": caps.device_name,
                    "created": time.time(),
                },
            )
        return self._remember(key, result)

    __call__ = run

    def _key(
        self, plan: _Plan, configs: list[dict[str, Any]], target: Any, manifest: Any, caps: Any
    ) -> str | None:
        first = None
        for config in configs:
            try:
                first = plan.elaborate(config)
            except Exception:
                continue
            break
        if first is None:
            return None
        self._first_func = first
        spec = self.check_spec
        return tuning_cache.tuning_key(
            factory=self.fn,
            first_func=first,
            signature=self._signature if self._signature is not None else [list(plan.args), plan.kwargs],
            configs=configs,
            compile_args={"out_idx": plan.out_idx, **plan.options},
            check_args={
                "ref_prog": tuning_cache.source_text(spec.ref_prog),
                "manual_check_prog": tuning_cache.source_text(spec.manual_check_prog),
                "supply": str(spec.supply_type),
                "rtol": spec.rtol,
                "atol": spec.atol,
                "ratio": spec.max_mismatched_ratio,
                "skip_check": spec.skip_check,
            },
            target=target,
            manifest=manifest,
            device_name=caps.device_name + (" (emulated)" if caps.emulated else ""),
        )

    def _require_inputs(self, plan: _Plan, spec: CheckSpec) -> None:
        """Scalar parameters and symbolic dims have no generated value: ask for the inputs."""
        first = self._first_func
        if first is None or spec.inputs is not None or spec.supply_prog is not None:
            return
        outs = set(_out_positions(plan.out_idx, len(first.params)))
        for index, param in enumerate(param_specs(first)):
            if index in outs:
                continue
            symbolic = param.is_tensor and not all(isinstance(d, int) for d in param.shape or ())
            if not param.is_tensor or symbolic:
                what = "a scalar" if not param.is_tensor else f"symbolic dims {list(param.shape or ())}"
                raise AutotuneInputError(
                    f"cannot make a tuning input for parameter {param.name} of "
                    f"{getattr(self.fn, '__name__', 'the kernel')}: it has {what}",
                    hint="pass the inputs with `with set_autotune_inputs(*inputs): ...`, or "
                    "set_profile_args(supply_prog=...)",
                    location=call_site(),
                )

    def _remember(self, key: str | None, result: AutotuneResult) -> AutotuneResult:
        kernel = result.kernel
        if kernel is not None:  # TileLang's kernel attributes after tuning
            kernel.latency = result.latency  # type: ignore[attr-defined]
            kernel.config = result.config  # type: ignore[attr-defined]
            kernel.ref_latency = result.ref_latency  # type: ignore[attr-defined]
        if key is not None and result.latency is not None:
            with self._memory_lock:
                self._memory_cache[key] = result
        return result

    def _result(self, kernel: JITKernel, config: dict[str, Any], **fields: Any) -> AutotuneResult:
        return AutotuneResult(
            config=config, kernel=kernel, func=kernel.func, libcode=kernel.get_kernel_source(), **fields
        )

    def _from_entry(
        self, plan: _Plan, configs: list[dict[str, Any]], entry: dict[str, Any]
    ) -> AutotuneResult | None:
        config = configs[entry["best_index"]]
        try:
            kernel = plan.compile(config)
        except Exception as exc:
            logger.warning("cached best config %s no longer compiles (%s); tuning again", config, exc)
            return None
        skipped = [
            SkippedConfig(int(s["index"]), configs[int(s["index"])], str(s["reason"]), str(s["message"]))
            for s in entry.get("skipped", [])
            if 0 <= int(s.get("index", -1)) < len(configs)
        ]
        return self._result(
            kernel,
            config,
            latency=entry.get("latency"),
            ref_latency=entry.get("ref_latency"),
            skipped=skipped,
            from_cache=True,
            latencies={int(i): float(t) for i, t in (entry.get("latencies") or {}).items()},
        )

    def _first_valid(
        self, plan: _Plan, configs: list[dict[str, Any]], spec: CheckSpec | None = None
    ) -> AutotuneResult:
        """The first config that compiles and, given ``spec``, passes the check."""
        inputs = Inputs(spec) if spec is not None else None
        skipped: list[SkippedConfig] = []
        for index, config in enumerate(configs):
            try:
                kernel = plan.compile(config)
            except Exception as exc:
                skipped.append(SkippedConfig(index, config, COMPILE_FAILED, _describe(exc)))
                continue
            if spec is not None and inputs is not None:
                try:
                    check(kernel, spec, inputs)
                except Exception as exc:
                    skipped.append(SkippedConfig(index, config, "mismatch", _describe(exc)))
                    continue
            return self._result(kernel, config, skipped=skipped)
        raise self._none_valid(skipped)

    def _tune_here(
        self,
        plan: _Plan,
        configs: list[dict[str, Any]],
        spec: CheckSpec,
        budget: Budget,
        early_stop_factor: float | None,
        manifest: Any,
    ) -> AutotuneResult:
        name = getattr(self.fn, "__name__", "kernel")
        progress = Progress(name, len(configs))
        skipped: list[SkippedConfig] = []
        try:
            kernels = self._compile_all(plan, configs, budget.timeout_s, manifest, progress, skipped)
            inputs = Inputs(spec)
            best, best_index, best_kernel = math.inf, -1, None
            latencies: dict[int, float] = {}
            twins = _twins(kernels)
            # Every candidate checked first (its call timed), then timed fastest first: the best
            # is known early, and a candidate far behind it stops after one more call.
            checks = {i: checked(k, spec, inputs) for i, k in kernels if i not in twins}
            order = sorted(
                (pair for pair in kernels if pair[0] in checks),
                key=lambda pair: _or_inf(checks[pair[0]].latency),
            )
            for index, kernel in order:
                outcome = measure(
                    kernel,
                    spec,
                    inputs,
                    budget,
                    best=best,
                    early_stop_factor=early_stop_factor,
                    check_outcome=checks[index],
                )
                if outcome.status != OK or outcome.latency is None:
                    skipped.append(SkippedConfig(index, configs[index], outcome.status, outcome.message))
                    logger.info(
                        "autotune %s: config %s skipped (%s) %s",
                        name,
                        configs[index],
                        outcome.status,
                        outcome.message,
                    )
                    progress.failed_one()
                    continue
                latencies[index] = outcome.latency
                progress.benchmarked_one(outcome.latency)
                logger.info("autotune %s: config %s: %.4g ms", name, configs[index], outcome.latency)
                if outcome.latency < best:
                    best, best_index, best_kernel = outcome.latency, index, kernel
            for index, original in twins.items():  # the same code as a timed one: its verdict
                if original in latencies:
                    latencies[index] = latencies[original]
                    progress.benchmarked_one(latencies[index])
                    continue
                twin = next(s for s in skipped if s.index == original)
                skipped.append(
                    SkippedConfig(index, configs[index], twin.reason, f"same code as config {original}")
                )
                progress.failed_one()
        finally:
            progress.close()
        skipped.sort(key=lambda s: s.index)
        if best_kernel is None:
            raise self._none_valid(skipped)
        benchmarked = len(latencies) - sum(i in latencies for i in twins)
        return self._winner(
            name, configs, skipped, best_index, best_kernel, best, spec, inputs, budget,
            benchmarked=benchmarked, latencies=latencies,
        )  # fmt: skip

    def _compile_all(
        self,
        plan: _Plan,
        configs: list[dict[str, Any]],
        timeout: float,
        manifest: Any,
        progress: Progress,
        skipped: list[SkippedConfig],
    ) -> list[tuple[int, JITKernel]]:
        """Compile every candidate; the ones that compiled, in config order."""
        from . import cache

        workers = worker_count(len(configs))
        parallel = (
            workers > 1
            and cache.cache_enabled()
            and manifest.save is not None
            and manifest.restore is not None
            and _can_fork()
        )
        pool_result: dict[int, Any] = {}
        if parallel:
            jobs = [functools.partial(plan.compile, config) for config in configs]
            pool_result = compile_in_pool(jobs, workers, timeout, lambda i, r: progress.compiled_one())
        compiled: list[tuple[int, JITKernel]] = []
        for index, config in enumerate(configs):
            outcome = pool_result.get(index)
            if outcome is TIMEOUT:
                skipped.append(SkippedConfig(index, config, TIMED_OUT, f"compiling took over {timeout:g} s"))
                progress.failed_one()
                continue
            if isinstance(outcome, str):
                skipped.append(SkippedConfig(index, config, COMPILE_FAILED, outcome))
                progress.failed_one()
                continue
            start = time.monotonic()
            try:
                kernel = plan.compile(config)  # a kernel-cache hit after the pool compiled it
            except Exception as exc:
                skipped.append(SkippedConfig(index, config, COMPILE_FAILED, _describe(exc)))
                progress.failed_one()
                continue
            if not parallel:
                progress.compiled_one()
                if time.monotonic() - start > timeout:
                    skipped.append(
                        SkippedConfig(index, config, TIMED_OUT, f"compiling took over {timeout:g} s")
                    )
                    progress.failed_one()
                    continue
            compiled.append((index, kernel))
        return compiled

    def _finish_remote(
        self,
        plan: _Plan,
        configs: list[dict[str, Any]],
        spec: CheckSpec,
        outcomes: list[Outcome],
        budget: Budget,
    ) -> AutotuneResult:
        """Pick the best of outcomes measured elsewhere and build its kernel here."""
        name = getattr(self.fn, "__name__", "kernel")
        skipped = [
            SkippedConfig(i, configs[i], o.status, o.message)
            for i, o in enumerate(outcomes)
            if o.status != OK
        ]
        timed = [(o.latency, i) for i, o in enumerate(outcomes) if o.status == OK and o.latency is not None]
        if not timed:
            raise self._none_valid(skipped)
        latency, index = min(timed)
        kernel = plan.compile(configs[index])
        return self._winner(
            name, configs, skipped, index, kernel, latency, spec, Inputs(spec), budget,
            benchmarked=len(timed), latencies={i: t for t, i in timed},
        )  # fmt: skip

    def _winner(
        self,
        name: str,
        configs: list[dict[str, Any]],
        skipped: list[SkippedConfig],
        index: int,
        kernel: JITKernel,
        latency: float,
        spec: CheckSpec,
        inputs: Inputs,
        budget: Budget,
        **fields: Any,
    ) -> AutotuneResult:
        """The result of a tuning that ``configs[index]`` won with ``latency`` ms: one warning for
        the skipped candidates, and the reference program timed on the winner's inputs within
        ``budget``."""
        self._warn_skipped(name, len(configs), skipped)
        ref = reference_latency(kernel, spec, inputs, budget)
        config = configs[index]
        return self._result(kernel, config, latency=latency, ref_latency=ref, skipped=skipped, **fields)

    def _warn_skipped(self, name: str, total: int, skipped: list[SkippedConfig]) -> None:
        """One warning for the candidates that failed (hopeless ones did not: they were slow)."""
        failed = [s for s in skipped if s.reason != HOPELESS]
        if not failed:
            return
        reasons: dict[str, int] = {}
        for s in failed:
            reasons[s.reason] = reasons.get(s.reason, 0) + 1
        summary = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        logger.warning(
            "autotune %s: %d of %d configs failed (%s); see AutotuneResult.skipped",
            name,
            len(failed),
            total,
            summary,
        )

    def _none_valid(self, skipped: list[SkippedConfig]) -> NoValidConfigError:
        name = getattr(self.fn, "__name__", "the kernel")
        lines = "; ".join(
            f"#{s.index} {s.config}: {s.reason}: {s.message.splitlines()[0] if s.message else ''}"
            for s in skipped[:5]
        )
        return NoValidConfigError(
            f"no config of {name} compiled, ran within the timeout and matched the reference "
            f"({len(skipped)} tried): {lines}",
            hint="fix the configs (see each reason), loosen rtol/atol, or raise timeout",
            location=call_site(),
        )


def _or_inf(latency: float | None) -> float:
    return math.inf if latency is None else latency


def _twins(kernels: list[tuple[int, JITKernel]]) -> dict[int, int]:
    """``{index: earlier index}`` for CPU candidates whose machine code is that of an earlier one
    (a bf16 gemm's ``block_K`` when its K loop folds into one call; tunables the CPU ignores):
    timing them again would measure the same kernel."""
    first: dict[str, int] = {}
    twins: dict[int, int] = {}
    for index, kernel in kernels:
        code = kernel.artifact.sources.get("llvm") if kernel.device == "cpu" else None
        if not code:
            continue
        digest = hashlib.sha256(code.encode()).hexdigest()
        if digest in first:
            twins[index] = first[digest]
        else:
            first[digest] = index
    return twins


def _call_configs(make: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """``make(*args, **kwargs)``, leaving out keyword arguments ``make`` has no parameter for
    (a config function of ``M, N, K`` called for ``matmul(M, N, K, dtype=...)``)."""
    try:
        params = inspect.signature(make).parameters
    except (TypeError, ValueError):
        return make(*args, **kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return make(*args, **kwargs)
    return make(*args, **{k: v for k, v in kwargs.items() if k in params})


def _out_positions(out_idx: Any, count: int) -> list[int]:
    raw = [] if out_idx is None else ([out_idx] if isinstance(out_idx, int) else list(out_idx))
    return [i + count if i < 0 else i for i in raw]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:2000]}"


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()
