"""Tuning an eager ``@tilelang.jit`` kernel: the candidates of one call's arguments.

An eager kernel takes its shapes from the tensors it is called with, so ``@autotune`` over it
tunes at a call (and again at the first call with another signature of arguments): every
config is passed as keyword arguments beside the call's own, the body is specialized to the
call's tensors, and the candidates are compiled for the device those tensors live on. The
tuner's inputs are generated from the specialized kernel's parameters (the call's tensors
are never run on while tuning: a kernel may write its inputs). ``compile(M=..., ...)`` tunes
without tensors, from the ``T.const`` dims given by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tile.ir.backend import resolve_target, target_for_device
from tile.ir.target import AUTO

from .. import env
from .auto_target import arguments_device
from .eager import CompiledEagerKernel, EagerKernel, Specialization, is_tensor_value
from .jit import _pick_target, compile
from .tuner import PASS_CONFIGS_KEY, _Plan


@dataclasses.dataclass
class EagerPlan(_Plan):
    """How to build one config's kernel of an eager kernel, for one call's arguments (or for
    ``compile()``'s keyword arguments when ``ahead``)."""

    eager: EagerKernel | None = None
    ahead: bool = False
    """No tensors: the ``T.const`` dims are given by name, as to ``EagerKernel.compile``."""

    @classmethod
    def for_call(
        cls,
        eager: EagerKernel,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        target: Any,
        options: dict[str, Any],
    ) -> EagerPlan:
        """The plan for ``eager(*args, **kwargs)`` (or ``eager.compile(**kwargs)`` when no
        argument is a tensor), compiled for ``target``; target ``"auto"`` is the device of the
        call's tensors, as at an untuned call."""
        ahead = not any(is_tensor_value(v) for v in [*args, *kwargs.values()])
        if isinstance(target, str) and target.strip() == AUTO and not env.DEFAULT_TARGET.get() and not ahead:
            tensors, _ = eager.split(args, kwargs)
            device = arguments_device(list(tensors.values()), list(tensors))
            resolved = target_for_device(*device)[0] if device is not None else resolve_target(AUTO)[0]
        else:
            resolved = _pick_target(target if target is not None else AUTO)[0]
        return cls(eager.fn, tuple(args), dict(kwargs), None, resolved, options, eager=eager, ahead=ahead)

    def _specialize(self, config: Mapping[str, Any]) -> Specialization:
        assert self.eager is not None
        values = {**self.kwargs, **{k: v for k, v in config.items() if k != PASS_CONFIGS_KEY}}
        if self.ahead:
            return self.eager.specialize_ahead(values)
        return self.eager.specialize(*self.eager.split(self.args, values))

    def elaborate(self, config: Mapping[str, Any]) -> Any:
        assert self.eager is not None
        func, self.out_idx = self._specialize(config).prim_func(self.eager.fn.__name__)
        return func

    def compile(self, config: Mapping[str, Any]) -> CompiledEagerKernel:
        assert self.eager is not None
        options = self.options_for(config)

        def build(func: Any, outputs: list[int]) -> Any:
            self.out_idx = outputs
            return compile(func, out_idx=outputs, target=self.target, **options)

        return CompiledEagerKernel(self.eager.finish(self._specialize(config), build))
