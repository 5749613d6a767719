"""The common case of a kernel call, checked with per-signature work done once.

``JITKernel.__call__`` checks every argument (type, dtype, shape, contiguity,
alignment) and raises typed errors naming the parameter. Most calls pass arrays that
are exactly right: all numpy arrays or all CPU torch tensors of the compiled dtypes
and static shapes. ``FastPath`` verifies exactly those conditions with cheap
identity/tuple comparisons against values precomputed per kernel, and answers
``MISS`` for anything else, so the full checker runs and raises (or stages) as
before: the fast path never accepts an argument the checker would refuse.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tile.ir.packed import subbyte_bits

from .arguments import ALIGNMENT, ParamSpec, aligned_empty, torch_cpu_empty

MISS = object()
"""``FastPath.call``'s answer when the arguments need the full checks."""


class FastPath:
    """Per-kernel precomputed checks for static-shape numpy / CPU torch calls."""

    def __init__(
        self, params: list[ParamSpec], out_idx: list[int], param_alignment: int, device: str
    ) -> None:
        self.out_idx = out_idx
        self.alignment = param_alignment
        # Not for T.StridedTensor parameters (the checker compares strides) nor sub-byte tensors
        # (their packed storage, uint8 with half the last dim, is what the checker reads).
        self.enabled = device == "cpu" and all(
            p.shape is None or (all(isinstance(d, int) for d in p.shape)
                                and p.strides is None and not subbyte_bits(p.dtype))
            for p in params
        )
        self.inputs: list[tuple[int, ParamSpec]] = [(i, p) for i, p in enumerate(params) if i not in out_idx]
        self.count = len(self.inputs)
        self.params = params
        self._np: list[Any] | None = None  # per parameter: (numpy dtype, shape) or None for scalars
        self._torch: list[Any] | None = None
        if self.enabled:
            try:
                self._np = [
                    None if p.shape is None else (_native_numpy_dtype(p.dtype), p.shape) for p in params
                ]
            except TypeError:  # an ml_dtypes type (bfloat16, float8): numpy cannot DLPack-export it
                self._np = None
            # numpy's "aligned" flag means element-aligned; enough when that is all kernels assume
            if self._np is not None and any(
                d is not None and param_alignment > d[0].alignment for d in self._np
            ):
                self._np = None

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """Run ``fn`` on ``args`` (plus allocated outputs) if they pass the checks, else ``MISS``."""
        if not self.enabled or len(args) != self.count:
            return MISS
        first = next((a for a in args if a is not None and not isinstance(a, int | float)), None)
        if type(first) is np.ndarray:
            return self._call_numpy(fn, args)
        torch = sys.modules.get("torch")
        if torch is not None and type(first) is torch.Tensor:
            return self._call_torch(fn, args, torch)
        return MISS

    def _call_numpy(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        specs = self._np
        if specs is None:
            return MISS
        full = list(args) if not self.out_idx else [None] * len(self.params)
        if self.out_idx:
            for (index, _), value in zip(self.inputs, args, strict=True):
                full[index] = value
        for index, (spec, value) in enumerate(zip(specs, full, strict=True)):
            if spec is None:
                continue
            if value is None:  # an output
                out = aligned_empty(spec[1], self.params[index].dtype)
                full[index] = out
                continue
            if type(value) is not np.ndarray or value.dtype != spec[0] or value.shape != spec[1]:
                return MISS
            flags = value.flags
            if not (flags.c_contiguous and flags.aligned):
                return MISS
        return self._run(fn, full)

    def _call_torch(self, fn: Callable[..., Any], args: tuple[Any, ...], torch: Any) -> Any:
        specs = self._torch
        if specs is None:
            specs = self._torch = [self._torch_spec(p, torch) for p in self.params]
        full: list[Any] = [None] * len(self.params)
        for (index, _), value in zip(self.inputs, args, strict=True):
            full[index] = value
        # each tensor attribute read costs a few hundred ns from Python, and a decoding step's
        # kernels take tens of microseconds: what the spec tells (element size, emptiness) is
        # precomputed, not asked of every tensor
        for index, (spec, value) in enumerate(zip(specs, full, strict=True)):
            if spec is None:
                continue
            dtype, shape, empty, align = spec
            if dtype is None:
                return MISS
            if value is None:
                full[index] = torch_cpu_empty(shape, dtype)
                continue
            if type(value) is not torch.Tensor or value.dtype is not dtype or value.shape != shape:
                return MISS
            # an empty tensor's strides need not be row-major (arguments.stage_aligned)
            if empty or not value.is_cpu or not value.is_contiguous():
                return MISS
            if value.data_ptr() % align:  # element-aligned at least (torch.frombuffer can offset)
                return MISS
        return self._run(fn, full)

    def _torch_spec(self, param: ParamSpec, torch: Any) -> tuple[Any, ...] | None:
        """(torch dtype, shape, whether it holds no element, the address alignment to test)."""
        if param.shape is None:
            return None
        dtype = getattr(torch, param.dtype, None)
        count = 1
        for d in param.shape:
            count *= int(d)
        size = int(dtype.itemsize) if dtype is not None else 1
        return dtype, param.shape, count == 0, max(self.alignment, size)

    def _run(self, fn: Callable[..., Any], full: list[Any]) -> Any:
        from .debug import raise_if_assertion_failed

        try:
            fn(*full)
        except Exception as exc:
            raise_if_assertion_failed(exc)
            raise
        raise_if_assertion_failed()
        if not self.out_idx:
            return None
        outputs = [full[i] for i in self.out_idx]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _native_numpy_dtype(name: str) -> np.dtype[Any]:
    """numpy's own dtype for ``name``; ``TypeError`` for types numpy cannot DLPack-export (ml_dtypes)."""
    dtype = np.dtype(name)  # TypeError for names numpy does not know
    if dtype.type.__module__ == "ml_dtypes":
        raise TypeError(name)
    return dtype


__all__ = ["ALIGNMENT", "MISS", "FastPath"]
