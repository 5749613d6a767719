"""Raw-pointer kernel parameters: ``a_ptr: T.ptr`` (TileLang's spelling).

A pointer parameter is typed by the tensor made over it inside the kernel
(``A = T.make_tensor(a_ptr, (m, k), dtype)``). At the call it takes the address of memory
the caller owns: a tensor (its data), or an integer address (``a.data_ptr()``).

Example::

    @T.prim_func
    def scale(a_ptr: T.ptr, c_ptr: T.ptr, m: T.int32):
        A = T.make_tensor(a_ptr, (m,), "float32")
        C = T.make_tensor(c_ptr, (m,), "float32")
        with T.Kernel(1, threads=32):
            for i in T.Parallel(m):
                C[i] = A[i] * 2.0

    tilelang.compile(scale, target="cpu")(a, c, a.shape[0])
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from tvm.script import tirx as _script  # type: ignore[import-untyped]

from .arguments import ParamSpec, is_torch_tensor


def ptr(dtype: Any = None, storage_scope: str = "global") -> Any:
    """``a_ptr: T.ptr`` (or ``T.ptr()``, ``T.ptr("float16")``): a pointer parameter."""
    return _script.handle(dtype, storage_scope)


ptr.is_pointer_type = True  # type: ignore[attr-defined]  # dtype_name refuses it as an element type


def is_pointer(spec: ParamSpec) -> bool:
    """Whether a kernel parameter is a raw pointer (``T.ptr`` / ``T.handle``)."""
    return spec.shape is None and spec.dtype.startswith("T.handle")


def pointer_argument(value: Any) -> Any:
    """The address ``value`` gives a pointer parameter, as the compiled kernel takes it;
    ``None`` when ``value`` is neither a tensor nor an integer address."""
    if isinstance(value, ctypes.c_void_p):
        return value
    if is_torch_tensor(value):
        return ctypes.c_void_p(value.data_ptr())
    if isinstance(value, np.ndarray):
        return ctypes.c_void_p(value.ctypes.data)
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return ctypes.c_void_p(int(value))
    return None
