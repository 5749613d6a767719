"""Element types as users spell them: ``"float16"``, ``T.float16``, numpy or torch dtypes."""

from __future__ import annotations

from typing import Any

from tvm.script import tirx as _tvm_script  # type: ignore[import-untyped]

from ..errors import TileTypeError
from .callsite import call_site
from .session import in_kernel_session

ALIASES = {"float8_e4m3": "float8_e4m3fn"}
"""Names TileLang programs use for another element type here. ``float8_e4m3`` is apache-tvm's
IEEE-style 8-bit float (with infinities, largest finite 240); TileLang's CUDA code stores it as
CUDA's ``__nv_fp8_e4m3`` and hands it to torch as ``torch.float8_e4m3fn``: the OCP e4m3 format
(no infinities, largest finite 448), which is tile's ``float8_e4m3fn``."""


def dtype_name(dtype: Any) -> str:
    """The canonical dtype string of ``dtype`` (``T.float16`` -> ``"float16"``).

    Accepts strings, TVMScript dtype constructors (``T.float32``), TVM ``PrimType``s,
    numpy dtypes/scalar types and torch dtypes; ``ALIASES`` map to tile's names.
    """
    if isinstance(dtype, str):
        return ALIASES.get(str.__str__(dtype), dtype)
    if getattr(dtype, "is_pointer_type", False):  # T.ptr as an element type, outside T.Tensor
        raise TileTypeError(
            "T.ptr is an element type only of a tensor parameter (a table of pointers)",
            hint="annotate the table as T.Tensor([G], T.ptr) (it holds int64 addresses), "
            "or use int64 elements",
            # in a kernel body the parser names the line; an annotation is evaluated before any parse
            location=None if in_kernel_session() else call_site(),
        )
    if dtype is _tvm_script.bool:  # TVMScript's ``T.bool`` is a function, not a DtypeConstructor
        return "bool"
    named = getattr(dtype, "_dtype_str", None)  # TVMScript ``DtypeConstructor``
    if isinstance(named, str):
        return ALIASES.get(named, named)
    inner = getattr(dtype, "dtype", None)  # tvm PrimType
    if type(dtype).__name__ == "PrimType" and inner is not None:
        return str(inner)
    if type(dtype).__module__.startswith("torch"):
        return str(dtype).removeprefix("torch.")
    try:
        import numpy as np

        return str(np.dtype(dtype))
    except TypeError:
        pass
    raise TileTypeError(
        f"{dtype!r} is not an element type",
        hint='use a name like "float16" or T.float16',
    )


def shape_list(shape: Any) -> list[Any]:
    """A shape as a list: from a tuple, list, TVM array (``A.shape``) or a single dim."""
    if isinstance(shape, list | tuple):
        return list(shape)
    if hasattr(shape, "__len__") and hasattr(shape, "__getitem__") and not hasattr(shape, "ty"):
        return [shape[i] for i in range(len(shape))]
    return [shape]


class TensorProxy:
    """``T.Tensor(shape, dtype)`` / ``T.Tensor[shape, dtype]``: a typed tensor annotation.

    The dtype may be a name or a dtype object (``T.float16``); shapes may mix ints
    and symbolic dims.
    """

    def __call__(self, shape: Any, dtype: Any = "float32", data: Any = None, **kwargs: Any) -> Any:
        from tvm.script import tirx as script  # type: ignore[import-untyped]

        dims = shape_list(shape)
        if getattr(dtype, "is_pointer_type", False):  # a table of pointers: their 64-bit addresses
            dtype = "int64"
        if data is not None:  # in a kernel body: T.Tensor((K * C, F), dtype, kernel.data) views memory
            from tvm.tirx.script import builder  # type: ignore[import-untyped]

            return builder.decl_buffer(dims, dtype_name(dtype), data=data, **kwargs)
        return script.Buffer(dims, dtype_name(dtype), **kwargs)

    def __getitem__(self, key: Any) -> Any:
        """``T.Tensor[shape, dtype]``, or ``T.Tensor[shape]`` (float32, as ``T.Tensor(shape)``)."""
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], tuple | list | str):
            return self(key[0], key[1])
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str):  # T.Tensor[M, "float16"]
            return self((key[0],), key[1])
        if isinstance(key, tuple | list) and not any(isinstance(d, tuple | list) for d in key):
            return self(key)
        raise TileTypeError(
            "T.Tensor[...] takes a shape and a dtype", hint='write T.Tensor[(M, N), "float16"]'
        )


Tensor = TensorProxy()


class StridedTensorProxy:
    """``T.StridedTensor(shape, strides, dtype)``: a tensor parameter with explicit element strides.

    The kernel indexes it through the declared strides, so a non-contiguous view (a column
    slice, a transpose) is passed without a copy. Strides may be ints or symbolic dims
    (``T.dynamic``); a call checks the argument's strides against them.
    """

    def __call__(self, shape: Any, strides: Any, dtype: Any = "float32", **kwargs: Any) -> Any:
        from tvm.script import tirx as script

        dims, steps = shape_list(shape), shape_list(strides)
        if len(dims) != len(steps):
            raise TileTypeError(
                f"T.StridedTensor has {len(dims)} dims but {len(steps)} strides",
                hint="give one stride (in elements) per dim: T.StridedTensor((M, N), (ld, 1), dtype)",
            )
        return script.Buffer(dims, dtype_name(dtype), strides=steps, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, tuple) or len(key) != 3:
            raise TileTypeError(
                "T.StridedTensor[...] takes a shape, strides and a dtype",
                hint='write T.StridedTensor[(M, N), (ld, 1), "float16"]',
            )
        return self(key[0], key[1], key[2])


StridedTensor = StridedTensorProxy()
