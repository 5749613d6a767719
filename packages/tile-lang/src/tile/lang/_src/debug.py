"""Debugging inside kernels: ``T.print`` and ``T.device_assert``.

Both lower to packed calls into Python functions registered with tvm_ffi, which
generated CPU code reaches through the runtime's global function table:

* ``T.print(value_or_buffer, msg="")`` prints one line per value (every element of a
  buffer, with its index), prefixed with the block index and ``msg``.
* ``T.device_assert(cond, msg="")`` stops the kernel when ``cond`` is false; the
  call raises ``KernelAssertionError`` naming the message and the assert's line.

Example::

    with T.Kernel(T.ceildiv(N, 32), threads=128) as bx:
        T.print(A_shared, msg="tile")
        T.device_assert(A[bx * 32] >= 0.0, "inputs must be non-negative")
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.annotations import CHECK_FAILED, DEBUG_PRINT, DEVICE_ASSERT
from tile.ir.errors import SourceLocation

from ..errors import KernelAssertionError, KernelBoundsError, TileScopeError, TileTypeError
from .session import current_location, current_session

PRINT_FUNC = DEBUG_PRINT
ASSERT_FUNC = DEVICE_ASSERT

_failures: list[tuple[str, str, tuple[int, ...]]] = []
_lock = threading.Lock()


def _format_value(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


@tvm_ffi.register_global_func(PRINT_FUNC, override=True)  # type: ignore[untyped-decorator]
def _print(msg: str, bx: int, by: int, bz: int, label: str, value: Any, *index: int) -> int:
    where = f"{label}[{', '.join(str(i) for i in index)}]" if index else label
    prefix = f"[block ({bx}, {by}, {bz})]"
    if not label:  # T.print(msg="...") alone
        text = f"{prefix} {msg}"
    else:
        text = f"{prefix} {msg}: {where} = {_format_value(value)}" if msg else f"{prefix} {where} = {value}"
    with _lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    return 0


@tvm_ffi.register_global_func(ASSERT_FUNC, override=True)  # type: ignore[untyped-decorator]
def _assert_failed(msg: str, where: str, bx: int, by: int, bz: int) -> int:
    with _lock:
        _failures.append((msg, where, (bx, by, bz)))
    raise RuntimeError(f"device assertion failed: {msg}")


@tvm_ffi.register_global_func(CHECK_FAILED, override=True)  # type: ignore[untyped-decorator]
def _check_failed(
    tensor: str, kind: str, where: str, bx: int, by: int, bz: int, *index_and_shape: int
) -> int:
    rank = len(index_and_shape) // 2
    index, shape = index_and_shape[:rank], index_and_shape[rank:]
    with _lock:
        _bounds_failures.append((tensor, kind, where, (bx, by, bz), tuple(index), tuple(shape)))
    raise RuntimeError(f"out-of-bounds {kind} of {tensor}")


_bounds_failures: list[tuple[str, str, str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = []


def _location(where: str) -> SourceLocation | None:
    parts = where.split(":")
    numbers = [p for p in parts[1:] if p.isdigit()]
    if len(parts) < 2 or not numbers:
        return None
    filename = ":".join(parts[: len(parts) - len(numbers)])
    return SourceLocation.from_file(filename, *map(int, numbers[:2]))


def raise_if_assertion_failed(exc: BaseException | None = None) -> None:
    """After a kernel call: raise ``KernelAssertionError`` for a recorded ``T.device_assert`` failure,
    ``KernelBoundsError`` for an out-of-bounds access of a checked kernel (``TILE_CHECK=1``)."""
    if not _failures and not _bounds_failures:  # the common case, without taking the lock
        return
    with _lock:
        if _bounds_failures:
            tensor, kind, where, block, index, shape = _bounds_failures[0]
            _bounds_failures.clear()
            _failures.clear()
            bounds = KernelBoundsError(
                f"out-of-bounds {kind} of {tensor}[{', '.join(map(str, index))}] in block {block}: "
                f"{tensor} has shape ({', '.join(map(str, shape))})",
                hint="guard the access (if i < n:) or fix its index; TILE_CHECK=1 found it",
                location=_location(where),
            )
            raise bounds from exc
        if not _failures:
            return
        msg, where, block = _failures[0]
        _failures.clear()
    error = KernelAssertionError(
        f"T.device_assert failed in block {block}: {msg or '(no message)'}",
        hint="the condition was false when the kernel ran; check the inputs or the indexing",
        location=_location(where),
    )
    raise error from exc


def _block_index(construct: str) -> list[Any]:
    session = current_session(construct)
    if not session.kernels:
        raise TileScopeError(
            f"{construct} can only be used inside a `with T.Kernel(...)` block",
            hint="print or assert from inside the kernel body",
        )
    blocks = list(session.kernels[-1].block_vars)
    return blocks + [tirx.const(0, "int32")] * (3 - len(blocks))


def _printable(value: Any) -> Any:
    dtype = str(value.ty)
    if dtype.startswith(("float", "bfloat")):
        return tirx.Cast("float64", value)
    if dtype == "bool":
        return tirx.Cast("int64", value)
    return tirx.Cast("int64", value)


def _packed(*args: Any) -> None:
    # The one-trip loop keeps an enclosing T.Parallel loop from being turned into a
    # vector loop: a call with side effects must run once per iteration.
    with B.serial(0, 1):
        B.evaluate(tirx.call_packed(*args))


def print(value: Any = None, msg: str = "", warp_group_id: int = 0, warp_id: int = 0) -> None:
    """Print a scalar expression or every element of a buffer, prefixed with the block index;
    ``T.print(msg="...")`` prints the message alone. TileLang's ``warp_group_id``/``warp_id``
    (which thread prints a fragment) are accepted: tile prints each element once, from the
    thread that holds it."""
    del warp_group_id, warp_id
    blocks = _block_index("T.print")
    if value is None:
        if not msg:
            hint = 'T.print(x) or T.print(msg="here")'
            raise TileTypeError("T.print needs a value or a message", hint=hint)
        _packed(PRINT_FUNC, str(msg), *blocks, "", tirx.const(0, "int64"))
        return
    if isinstance(value, bool | int | float):
        value = tirx.const(value)
    if isinstance(value, ir.Var) and tirx.is_buffer_var(value):
        _print_buffer(value, str(msg), blocks)
        return
    if not isinstance(value, ir.Expr):
        raise TileTypeError(
            f"T.print takes a buffer or a scalar expression, got {type(value).__name__}",
            hint="print a buffer (T.print(A_shared)) or an element (T.print(A[i, j]))",
        )
    _packed(PRINT_FUNC, str(msg), *blocks, _label(value), _printable(value))


def _label(value: Any) -> str:
    if isinstance(value, ir.TensorLoad):
        return str(value.source.name) + "[" + ", ".join(str(i) for i in value.indices) + "]"
    return str(value)


def _print_buffer(buffer: Any, msg: str, blocks: list[Any]) -> None:
    frames = [B.serial(0, extent) for extent in buffer.shape]
    index = [frame.__enter__() for frame in frames]
    try:
        value = _printable(tirx.BufferLoad(buffer, index))
        _packed(PRINT_FUNC, msg, *blocks, str(buffer.name), value, *index)
    finally:
        for frame in reversed(frames):
            frame.__exit__(None, None, None)


def device_assert(cond: Any, msg: str = "") -> None:
    """Stop the kernel with ``KernelAssertionError`` when ``cond`` is false."""
    blocks = _block_index("T.device_assert")
    if isinstance(cond, bool):
        cond = tirx.const(cond, "bool")
    where = current_location()
    site = f"{where.filename}:{where.line}:{where.column}" if where is not None else ""
    with B.If(tirx.Not(cond)), B.Then():
        _packed(ASSERT_FUNC, str(msg), site, *blocks)
