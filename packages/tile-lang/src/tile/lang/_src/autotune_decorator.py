"""``@autotune``: what TileLang programs stack above ``@tilelang.jit`` to tune a kernel.

The decorator keeps one tuning run per distinct argument set (tensors by their signature)
and hands each run to :class:`~tile.lang._src.tuner.AutoTuner`, which compiles, checks and
times the candidates.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from .callsite import call_site
from .eager import EagerKernel, is_tensor_value, tensor_signature
from .jit import _JitFactory
from .tuner import PASS_CONFIGS_KEY, RETURN_KERNEL, AutoTuner, _call_configs
from .tuning_measure import EARLY_STOP_FACTOR
from .tuning_results import AutotuneError


def _normalize(value: Any) -> Any:
    if is_tensor_value(value):  # a tensor argument (eager kernels): its dtype, shape, strides, device
        return tensor_signature(value)
    if isinstance(value, list | tuple):
        return tuple(_normalize(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _normalize(v)) for k, v in value.items()))
    return value


class AutoTuneImpl:
    """What ``@autotune(...)`` makes of a ``@tilelang.jit`` kernel.

    Over a kernel factory, calling it tunes once per distinct argument set and returns the
    best ``JITKernel``. Over an eager kernel (a body called with tensors), a call tunes once
    per distinct signature of its arguments (each tensor's dtype, shape, strides and device,
    and the other values), then runs the best kernel on the call's tensors and returns its
    outputs; ``compile(M=..., ...)`` tunes without tensors and returns the best kernel.
    """

    def __init__(
        self,
        jit_impl: _JitFactory | EagerKernel,
        configs: Any,
        profile: Mapping[str, Any],
        do_not_specialize: Sequence[str] | None = None,
        early_stop: bool = True,
        early_stop_factor: float = EARLY_STOP_FACTOR,
    ) -> None:
        self.jit_impl = jit_impl
        self.configs = configs
        self.profile = dict(profile)
        """``AutoTuner.set_profile_args`` keywords (``ProfileArgs`` and ``timeout``)."""
        self.do_not_specialize = do_not_specialize
        self.early_stop = early_stop
        self.early_stop_factor = early_stop_factor
        self._tuner_cache: dict[Any, Any] = {}  # TileLang's name: tests clear it
        self._eager = isinstance(jit_impl, EagerKernel)
        functools.update_wrapper(self, jit_impl.fn if isinstance(jit_impl, EagerKernel) else jit_impl.factory)

    def _tunable_names(self, configs: list[Mapping[str, Any]]) -> set[str]:
        return {k for c in configs for k in c if k != PASS_CONFIGS_KEY}

    @property
    def _signature(self) -> inspect.Signature:
        impl = self.jit_impl
        return impl.signature if isinstance(impl, EagerKernel) else inspect.signature(impl.factory)

    def _key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What one tuning run is for: the arguments, less ``do_not_specialize``; tensors by
        their signature (TileLang's key)."""
        skip = set(self.do_not_specialize or ())
        if not skip:
            return (_normalize(list(args)), _normalize(kwargs))
        params = self._signature.parameters
        full = self._signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
        full.apply_defaults()
        named = {**full.arguments, **{k: v for k, v in kwargs.items() if k not in params}}
        return _normalize({k: v for k, v in named.items() if k not in skip})

    def _tuned(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The best kernel for these arguments, tuned at their first call. A call that fixes a
        tuned parameter is compiled as asked, without tuning; over a kernel factory that kernel
        is kept under the call's key like a tuned one (so ``do_not_specialize`` arguments reuse
        it, as in TileLang); over an eager kernel the result is ``None`` (the call runs as is)."""
        key = self._key(args, kwargs)
        try:
            cached = self._tuner_cache.get(key)
        except TypeError:  # unhashable arguments: tune every call
            cached, key = None, None
        if cached is not None:
            return cached
        configs = _call_configs(self.configs, args, kwargs) if callable(self.configs) else self.configs
        configs = [configs] if isinstance(configs, Mapping) else list(configs)
        given = set(kwargs) | set(list(self._signature.parameters)[: len(args)])
        if self._tunable_names(configs) & given:
            if self._eager:
                return None
            kernel = self.jit_impl(*args, **kwargs)
            if key is not None:
                self._tuner_cache[key] = kernel
            return kernel
        tuner = AutoTuner(self.jit_impl, configs).set_profile_args(**self.profile)
        tuner.set_kernel_parameters(args, kwargs, signature=key)
        result = tuner.run(early_stop=self.early_stop, early_stop_factor=self.early_stop_factor)
        assert result.kernel is not None
        if key is not None:
            self._tuner_cache[key] = result.kernel
        return result.kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # TileLang's ``__return_kernel=True``: an eager kernel's call gives the kernel it would run
        return_kernel = bool(kwargs.pop(RETURN_KERNEL, False))
        if self._eager:
            tensors, _ = self.jit_impl.split(args, kwargs)  # type: ignore[union-attr]
            kernel = self._tuned(args, kwargs)
            if kernel is None:
                if return_kernel:
                    return self.jit_impl.get_kernel(*args, **kwargs)  # type: ignore[union-attr]
                return self.jit_impl(*args, **kwargs)
            return kernel if return_kernel else kernel.run_named(tensors)
        kernel = self._tuned(args, kwargs)
        return self.jit_impl(*args, **kwargs) if kernel is None else kernel

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The best kernel, tuned if need be (TileLang's ``.compile``). For an eager kernel, pass
        the ``T.const`` dims and other values by name, as to its ``compile``: the kernel is
        tuned on generated inputs of those shapes and called with the tensors, in order."""
        kernel = self._tuned(args, kwargs)
        if kernel is not None:
            return kernel
        return self.jit_impl.compile(*args, **kwargs)


class ProfileArgs(TypedDict, total=False):
    """The keywords ``@autotune`` passes on to ``AutoTuner.set_profile_args`` (whose defaults
    they keep): how candidates are fed, checked and timed."""

    warmup: float
    rep: float
    supply_type: Any
    ref_prog: Callable[..., Any] | None
    supply_prog: Callable[..., Any] | None
    rtol: float
    atol: float
    max_mismatched_ratio: float
    skip_check: bool
    manual_check_prog: Callable[..., Any] | None
    cache_input_tensors: bool


def autotune(
    func: Any = None,
    *,
    configs: Any,
    timeout: float = 100,
    do_not_specialize: Sequence[str] | None = None,
    early_stop: bool = True,
    early_stop_factor: float = EARLY_STOP_FACTOR,
    **profile: Unpack[ProfileArgs],
) -> Callable[[Any], AutoTuneImpl]:
    """Tune a ``@tilelang.jit`` kernel factory over ``configs`` (stack it above ``@tilelang.jit``).

    ``configs`` is a list of dicts of the factory's keyword arguments, or a function of the
    factory's arguments returning that list. Calling the decorated factory tunes once per
    distinct argument set (``do_not_specialize`` names arguments left out of that key) and
    returns the best kernel, with ``kernel.config``, ``kernel.latency`` and
    ``kernel.ref_latency`` set. Passing a tuned parameter yourself skips tuning. The other
    keywords (``ProfileArgs``: ``warmup``, ``rep``, ``ref_prog``, ``supply_prog``, ``rtol``,
    ``atol``, ...) are ``AutoTuner.set_profile_args``'s, with its defaults; ``timeout`` (seconds
    per call) is 100 here.

    Example::

        @autotune(configs=[{"block": 64}, {"block": 128}], ref_prog=lambda a, b: a + b)
        @tilelang.jit(out_idx=[-1])
        def add(n, block=64):
            ...

        kernel = add(1 << 20)
    """
    if func is not None:
        raise AutotuneError(
            "@autotune needs its configs: write @autotune(configs=[...])",
            hint="stack @autotune(configs=...) above @tilelang.jit(...)",
            location=call_site(),
        )
    unknown = sorted(set(profile) - set(ProfileArgs.__annotations__))
    if unknown:
        raise TypeError(f"autotune() got an unexpected keyword argument {unknown[0]!r}")
    profile_args = {"timeout": timeout, **profile}

    def decorate(impl: Any) -> AutoTuneImpl:
        if not isinstance(impl, _JitFactory | EagerKernel):
            raise AutotuneError(
                f"@autotune decorates a @tilelang.jit kernel, not {type(impl).__name__}",
                hint="stack the decorators as @autotune(configs=...) over @tilelang.jit(...) "
                "over the kernel factory or eager kernel function",
                location=call_site(),
            )
        return AutoTuneImpl(impl, configs, profile_args, do_not_specialize, early_stop, early_stop_factor)

    return decorate
