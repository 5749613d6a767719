"""``tile.lang.language.dtypes`` (TileLang's ``tilelang.language.dtypes``): the element types
as a module of their own, and the tables between them and torch's and numpy's.

Programs import it as a namespace of types (``from tilelang.language import dtypes as T``),
for the ``dtype`` class (``dtype("float16")``) and for the torch tables their helpers use
(``_TORCH_DTYPE_TO_STR[x.dtype]``). Every name here is the object ``tile.lang.language``
has under that name.

Example::

    >>> import torch
    >>> from tile.lang.language import dtypes
    >>> dtypes._TORCH_DTYPE_TO_STR[torch.bfloat16], dtypes.float16.bits
    ('bfloat16', 16)
    >>> dtypes.resolve_torch_storage_dtype("int4")
    'int8'
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .. import language as _T
from .._src.compat_fp4 import Float4E2M1Unpacked as _Float4E2M1Unpacked
from .._src.compat_lang import dtype as dtype
from .._src.tensor_utils import torch_storage_dtype_name as _storage_name

_all_dtypes: list[str] = sorted(
    name for name, value in vars(_T).items() if isinstance(value, dtype) and not name.startswith("_")
)
"""The names of every element type ``T`` has (``float16``, ``half``, ``float16x2``, ``int4``, ...)."""

globals().update({name: getattr(_T, name) for name in _all_dtypes})

_TORCH_DTYPE_TO_STR: dict[Any, str] = {
    value: name
    for name in sorted({str(getattr(_T, n)) for n in _all_dtypes})
    if isinstance(value := getattr(torch, name, None), torch.dtype) and _storage_name(name) == name
}
"""Each torch dtype to the name of its element type here (``torch.float16`` -> ``"float16"``);
torch's 4-bit placeholders (``torch.int4``) are left out: tensors of 4-bit types are bytes here."""

_STR_TO_TORCH_DTYPE: dict[str, Any] = {name: value for value, name in _TORCH_DTYPE_TO_STR.items()}
"""The inverse of ``_TORCH_DTYPE_TO_STR``."""

_NUMPY_DTYPE_TO_STR: dict[Any, str] = {
    np.dtype(name).type: name
    for name in (
        *("bool", "int8", "int16", "int32", "int64"),
        *("uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"),
    )
}
"""numpy's scalar types to the names here (``np.float32`` -> ``"float32"``)."""

_UNPACKED_FP4_NAMES = ("float4_e2m1_unpacked", "custom[float4_e2m1_unpacked]8")
"""How TileLang's programs name FP4 stored one code per byte (its TVM's custom-type spelling too)."""

F8F6F4_NAMES = frozenset(
    {"float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"}
)
"""The scalar types Blackwell's ``kind::f8f6f4`` tensor-core operands take."""


def get_tvm_dtype(value: Any) -> dtype:
    """``value`` (a name, ``T.*`` type, torch or numpy dtype) as a :class:`dtype`."""
    if isinstance(value, dtype):
        return value
    if isinstance(value, str) and str.__str__(value) in _UNPACKED_FP4_NAMES:
        return _T.float4_e2m1_unpacked
    if isinstance(value, torch.dtype) and value in _TORCH_DTYPE_TO_STR:
        return dtype(_TORCH_DTYPE_TO_STR[value])
    return dtype(value)


def resolve_torch_storage_dtype(value: Any) -> dtype:
    """The element type of the torch tensors that hold ``value``'s data: itself, except for the
    4-bit types (``int4`` in ``int8``; ``float4_e2m1fn`` in ``float4_e2m1fnx2``, or ``int8``
    where torch lacks ``float4_e2m1fn_x2``)."""
    name = _storage_name(str(get_tvm_dtype(value)))
    return dtype("float4_e2m1fnx2" if name == "float4_e2m1fn_x2" else name)


def is_float4_e2m1fn(value: Any) -> bool:
    """Whether ``value`` is FP4 E2M1 packed two codes per byte."""
    return get_tvm_dtype(value).is_float4_e2m1fn()


def is_float4_e2m1_unpacked(value: Any) -> bool:
    """Whether ``value`` is FP4 E2M1 stored one code per byte (``T.float4_e2m1_unpacked``)."""
    return isinstance(get_tvm_dtype(value), _Float4E2M1Unpacked)


def is_float4(value: Any) -> bool:
    """Whether ``value`` is FP4 E2M1, packed or unpacked."""
    return is_float4_e2m1fn(value) or is_float4_e2m1_unpacked(value)


def is_f8f6f4_family(value: Any) -> bool:
    """Whether ``value`` is an 8-, 6- or 4-bit float of the OCP formats (FP4 unpacked too)."""
    found = get_tvm_dtype(value)
    return str.__str__(found) in F8F6F4_NAMES or is_float4_e2m1_unpacked(found)


__all__ = [
    *_all_dtypes,
    "dtype",
    "get_tvm_dtype",
    "is_f8f6f4_family",
    "is_float4",
    "is_float4_e2m1_unpacked",
    "is_float4_e2m1fn",
    "resolve_torch_storage_dtype",
]
