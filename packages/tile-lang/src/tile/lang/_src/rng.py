"""Counter-based random numbers in kernels: ``T.rng_init``, ``T.rng_rand``, ``T.rng_rand_float``.

The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
3", SC 2011): a 128-bit counter ``(offset, subsequence)`` encrypted under the 64-bit
``seed`` in ten rounds of multiply/xor. ``T.rng_init(seed, subsequence, offset)`` sets the
counter; each draw encrypts the counter and advances it by one, so a thread (a block on
the CPU) that starts at ``offset`` draws the numbers of counters ``offset, offset + 1,
...``. Every backend runs it: it is integer arithmetic on local scalars. The numbers are
Philox's, not those of the curand generator TileLang calls (``generator=`` is accepted;
every generator name gives Philox4x32-10).

Example::

    T.rng_init(seed, 0, bx * 128)
    for i in T.serial(128):
        A[bx * 128 + i] = T.rng_rand()
"""

from __future__ import annotations

import math
from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import tirx  # type: ignore[import-untyped]
from tvm.script import tirx as _script  # type: ignore[import-untyped]
from tvm.script.ir_builder import IRBuilder  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]
from tvm.tirx.script.builder.frame import ForFrame  # type: ignore[import-untyped]

from ..errors import TileScopeError, TileTypeError
from .builtins import _alloc, _kernel
from .session import current_session

PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
ROUNDS = 10


def _u32(value: Any) -> Any:
    return tirx.const(value, "uint32") if isinstance(value, int) else tirx.Cast("uint32", value)


def _u64(value: Any) -> Any:
    return tirx.const(value, "uint64") if isinstance(value, int) else tirx.Cast("uint64", value)


def rng_init(seed: Any, subsequence: Any = 0, offset: Any = 0, generator: str = "philox") -> None:
    """Start this thread's random stream: key ``seed``, counter ``(offset, subsequence)``."""
    kernel = _kernel("T.rng_init")
    counter = _alloc("T.rng_init", [4], "uint32", "local")
    key = _alloc("T.rng_init", [2], "uint32", "local")
    words = [_u64(offset), _u64(subsequence)]
    for i, word in enumerate(words):
        B.buffer_store(counter, _u32(word), [2 * i])
        B.buffer_store(counter, _u32(tirx.shift_right(word, _u64(32))), [2 * i + 1])
    seed64 = _u64(seed)
    B.buffer_store(key, _u32(seed64), [0])
    B.buffer_store(key, _u32(tirx.shift_right(seed64, _u64(32))), [1])
    kernel.rng_state = (counter, key)  # type: ignore[attr-defined]  # read by _state


def _state(name: str) -> tuple[Any, Any]:
    state = getattr(_kernel(name), "rng_state", None)
    if state is None:
        raise TileScopeError(
            f"{name} before T.rng_init", hint="call T.rng_init(seed, subsequence, offset) first"
        )
    return state


def _parallel_iteration() -> tuple[Any, Any]:
    """``(linear index, trip count)`` of the ``T.Parallel`` loops around the call, or ``(0, 1)``."""
    parallel = current_session("T.rng_rand").parallel_vars
    index: Any = 0
    trips: Any = 1
    for frame in IRBuilder.current().frames:
        if isinstance(frame, ForFrame):
            for var, dom in zip(frame.vars, frame.doms, strict=True):
                if any(var.same_as(p) for p in parallel):
                    index, trips = index * dom.extent + var, trips * dom.extent
    return index, trips


def _philox_block(name: str) -> Any:
    """Encrypt the counter (four words, returned as a local buffer) and advance it by one.

    Inside ``T.Parallel`` loops, whose iterations run in any order (or at once), iteration
    ``i`` of ``n`` uses counter ``c + i`` and the counter advances by ``n`` after the loop:
    the same numbers a serial loop would draw, without a dependence between iterations.
    """
    counter, key = _state(name)
    index, trips = _parallel_iteration()
    if not (isinstance(trips, int) and trips == 1):
        _advance_after_loop(counter, trips)
    x = _alloc(name, [4], "uint32", "local")
    y = _alloc(name, [4], "uint32", "local")
    k = _alloc(name, [2], "uint32", "local")
    start = _u64(counter[0]) + tirx.shift_left(_u64(counter[1]), _u64(32)) + _u64(index)
    B.buffer_store(x, _u32(start), [0])
    B.buffer_store(x, _u32(tirx.shift_right(start, _u64(32))), [1])
    for i in range(2, 4):
        B.buffer_store(x, counter[i], [i])
    for i in range(2):
        B.buffer_store(k, key[i], [i])
    for _ in range(ROUNDS):
        p0 = _u64(x[0]) * _u64(PHILOX_M[0])
        p1 = _u64(x[2]) * _u64(PHILOX_M[1])
        hi0, lo0 = _u32(tirx.shift_right(p0, _u64(32))), _u32(p0)
        hi1, lo1 = _u32(tirx.shift_right(p1, _u64(32))), _u32(p1)
        new = [
            tirx.bitwise_xor(tirx.bitwise_xor(hi1, x[1]), k[0]),
            lo1,
            tirx.bitwise_xor(tirx.bitwise_xor(hi0, x[3]), k[1]),
            lo0,
        ]
        for i, value in enumerate(new):  # every new word reads the old ones: y, then x
            B.buffer_store(y, value, [i])
        for i in range(4):
            B.buffer_store(x, y[i], [i])
        for i in range(2):
            B.buffer_store(k, k[i] + _u32(PHILOX_W[i]), [i])
    if isinstance(trips, int) and trips == 1:
        _advance(counter, 1)
    return x


def _advance(counter: Any, by: Any) -> None:
    """Add ``by`` to the 64-bit offset in words 0-1 of ``counter``."""
    total = _u64(counter[0]) + tirx.shift_left(_u64(counter[1]), _u64(32)) + _u64(by)
    B.buffer_store(counter, _u32(total), [0])
    B.buffer_store(counter, _u32(tirx.shift_right(total, _u64(32))), [1])


def _advance_after_loop(counter: Any, trips: Any) -> None:
    """Advance ``counter`` by ``trips`` once the outermost enclosing ``T.Parallel`` loop ends."""
    frames = [f for f in IRBuilder.current().frames if isinstance(f, ForFrame)]
    parallel = current_session("T.rng_rand").parallel_vars
    outer = next(f for f in frames if any(v.same_as(p) for v in f.vars for p in parallel))
    current_session("T.rng_rand").body_rewrites.append(
        lambda body: _advance_loop(body, outer.vars[0], counter, trips)
    )


def _advance_loop(body: Any, loop_var: Any, counter: Any, trips: Any) -> Any:
    total = (
        _u64(tirx.BufferLoad(counter, [0]))
        + tirx.shift_left(_u64(tirx.BufferLoad(counter, [1])), _u64(32))
        + _u64(trips)
    )
    bump = [
        tirx.BufferStore(counter, _u32(total), [0]),
        tirx.BufferStore(counter, _u32(tirx.shift_right(total, _u64(32))), [1]),
    ]

    def on_for(loop: Any) -> Any:
        if not loop.loop_var.same_as(loop_var):
            return loop
        return tirx.SeqStmt([loop, *bump])

    return tvm_ffi.structural_map(body, (tirx.For, on_for))


def rng_rand() -> Any:
    """The next ``uint32`` of this thread's stream (the first word of the encrypted counter)."""
    return _philox_block("T.rng_rand")[0]


def rng_rand_float(bit: int = 32, dist: str = "uniform") -> Any:
    """The next float of this thread's stream: uniform in [0, 1), or standard normal
    (``dist="normal"``, Box-Muller on two uniforms); ``bit=64`` gives a float64 from 53 bits."""
    if bit not in (32, 64) or dist not in ("uniform", "normal"):
        raise TileTypeError(
            f"T.rng_rand_float(bit={bit!r}, dist={dist!r})",
            hint='bit is 32 or 64, dist is "uniform" or "normal"',
        )
    dtype = f"float{bit}"
    x = _philox_block("T.rng_rand_float")

    def uniform(hi: Any, lo: Any) -> Any:
        if bit == 32:  # the top 24 bits: exactly representable, below 1
            return tirx.Cast(dtype, tirx.shift_right(hi, _u32(8))) * tirx.const(2.0**-24, dtype)
        top = tirx.shift_left(_u64(tirx.shift_right(hi, _u32(5))), _u64(26))
        return tirx.Cast(dtype, top + _u64(tirx.shift_right(lo, _u32(6)))) * tirx.const(2.0**-53, dtype)

    u1 = uniform(x[0], x[1])
    if dist == "uniform":
        return u1
    u2 = uniform(x[2], x[3])
    radius = _script.sqrt(tirx.const(-2.0, dtype) * _script.log(tirx.const(1.0, dtype) - u1))
    return radius * _script.cos(tirx.const(2.0 * math.pi, dtype) * u2)
