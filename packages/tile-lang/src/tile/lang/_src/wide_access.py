"""Wide loads and stores (``T.ldg32``..``T.stg256``, ``T.lds*``/``T.sts*``) and the
single-element atomics ``T.atomic_load``/``T.atomic_store``.

A wide access moves 32, 64, 128 or 256 bits starting at an element as ``uint32`` lanes
(``uint32``, ``uint32x2``, ``uint32x4``, ``uint32x8``), whatever the buffer's element type:
``T.ldg128(X[i:i + 4])`` on a float32 tensor is its four floats' bits. Each is a vector
load or store of a ``uint32`` view of the buffer's memory, so every backend runs it (the
GPU code generators emit one wide instruction for it). ``pred=`` skips a load (it then
reads zeros) or a store where the predicate is false.

Example::

    val = T.ldg128(X[i * 4 : i * 4 + 4])   # four float32 as uint32x4
    T.stg128(Y[i * 4 : i * 4 + 4], val)
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import tirx  # type: ignore[import-untyped]
from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.ops.region import region_of

from ..errors import ArgumentValueError, TileTypeError
from .naming import named


def _start(where: Any, name: str) -> tuple[Any, list[Any]]:
    """The buffer and the start indices of a ``Buffer``, ``BufferRegion`` or ``BufferLoad``."""
    region, buffer, corner = region_of(where, f"T.{name}'s operand")
    return buffer, list(region.mins if region is not None else corner)


def _flat(buffer: Any, indices: list[Any]) -> Any:
    offset: Any = 0
    for extent, index in zip(buffer.shape, indices, strict=True):
        offset = offset * extent + index
    return offset


def _word_view(where: Any, bits: int, name: str) -> tuple[Any, Any]:
    """A ``uint32`` view of the buffer and the word index of ``where``'s first element."""
    buffer, indices = _start(where, name)
    elem_bits = int(tvm.DataType(str(buffer.dtype)).bits)
    if (elem_bits > 32 and elem_bits % 32) or (elem_bits < 32 and 32 % elem_bits):
        raise TileTypeError(f"T.{name} on {buffer.dtype} elements", hint="use a buffer of 8-64 bit elements")
    flat = _flat(buffer, indices)
    word = flat * (elem_bits // 32) if elem_bits >= 32 else tirx.floordiv(flat, 32 // elem_bits)
    view = B.decl_buffer(
        [tirx.floordiv(_count(buffer) * elem_bits, 32)], "uint32", data=buffer.data, scope=buffer.scope()
    )
    return view, word


def _count(buffer: Any) -> Any:
    total: Any = 1
    for extent in buffer.shape:
        total = total * extent
    return total


def _index(word: Any, lanes: int) -> Any:
    return word if lanes == 1 else tirx.Ramp(word, 1, lanes)


def _load(bits: int, name: str) -> Any:
    lanes = bits // 32

    def load(src: Any, pred: Any = None) -> Any:
        view, word = _word_view(src, bits, name)
        value = tirx.BufferLoad(view, [_index(word, lanes)])
        if pred is None:
            return value
        return _script.if_then_else(pred, value, tirx.const(0, value.ty.dtype))

    return named(load, name, f"{bits} bits from ``src``'s first element on, as {lanes} ``uint32`` lane(s).")


def _store(bits: int, name: str) -> Any:
    lanes = bits // 32

    def store(dst: Any, value: Any, pred: Any = None) -> None:
        view, word = _word_view(dst, bits, name)
        have = int(tvm.DataType(str(value.ty.dtype)).bits) * int(tvm.DataType(str(value.ty.dtype)).lanes)
        if have != bits:
            raise TileTypeError(
                f"T.{name} stores {bits} bits, the value is {value.ty.dtype} ({have} bits)",
                hint=f"pass a {bits}-bit value: T.{name.replace('st', 'ld', 1)}'s result or a T.reinterpret",
            )
        if str(value.ty.dtype) != ("uint32" if lanes == 1 else f"uint32x{lanes}"):
            value = tirx.reinterpret("uint32" if lanes == 1 else f"uint32x{lanes}", value)
        if pred is None:
            B.buffer_store(view, value, [_index(word, lanes)])
            return
        with B.If(pred), B.Then():
            B.buffer_store(view, value, [_index(word, lanes)])

    return named(store, name, f"Store {bits} bits (``uint32`` lanes) at ``dst``'s first element.")


ldg32, ldg64, ldg128, ldg256 = (_load(b, f"ldg{b}") for b in (32, 64, 128, 256))
lds32, lds64, lds128 = (_load(b, f"lds{b}") for b in (32, 64, 128))
stg32, stg64, stg128, stg256 = (_store(b, f"stg{b}") for b in (32, 64, 128, 256))
sts32, sts64, sts128 = (_store(b, f"sts{b}") for b in (32, 64, 128))


LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
STORE_ORDERS = ("relaxed", "release", "seq_cst")
"""The C++ memory orders an atomic load / store may have (a load cannot release, a store cannot
acquire)."""


def _check_order(name: str, memory_order: str, allowed: tuple[str, ...]) -> None:
    if memory_order not in allowed:
        raise ArgumentValueError(
            f"T.{name} does not support memory_order={memory_order!r}",
            hint="one of " + ", ".join(repr(o) for o in allowed),
        )


def atomic_load(src: Any, memory_order: str = "seq_cst") -> Any:
    """The element ``src`` (``T.atomic_load(A[i])``). On the CPU a kernel's global updates are
    ordered (its blocks run one after another when it has atomics); GPU loads of aligned
    elements are single transactions."""
    _check_order("atomic_load", memory_order, LOAD_ORDERS)
    buffer, indices = _start(src, "atomic_load")
    return tirx.BufferLoad(buffer, indices)


def atomic_store(dst: Any, value: Any, memory_order: str = "seq_cst") -> None:
    """Store ``value`` into the element ``dst`` (``T.atomic_store(A[i], v)``), as one write."""
    _check_order("atomic_store", memory_order, STORE_ORDERS)
    buffer, indices = _start(dst, "atomic_store")
    if isinstance(value, bool | int | float):  # a Python number: a constant of the element's type
        value = tirx.const(value, str(buffer.dtype))
    B.buffer_store(
        buffer, tirx.Cast(str(buffer.dtype), value) if value.ty.dtype != buffer.dtype else value, indices
    )
