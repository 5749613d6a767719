"""``T.vectorized`` loops wider than a 128-bit vector, and variable 8-bit broadcasts, on CUDA and ROCm.

``T.vectorized(32)`` over int8 made an ``int8x32`` vector and ``T.vectorized(128)`` over
float32 a ``float32x128`` one, for which TVM's CUDA C generator has no type ("Cannot
convert type T.int8x32 to CUDA type"); a non-constant int8 value broadcast into 4 lanes
stopped it too ("p.has_value()"). ``tile.ir.gpu.legalize_vectors`` cuts such loops into
128-bit chunks and packs the broadcast into one 32-bit word. Each kernel runs under the
CPU emulator, as CUDA sm_80 and as ROCm gfx90a, against numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _emu_targets import TARGETS, compile_for

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]
THREADS = 32


def add_one_kernel(dtype: str, lanes: int) -> Any:
    """Each thread adds 1 to its ``lanes`` consecutive elements in one vectorized loop."""
    n = THREADS * lanes

    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            for i in T.vectorized(lanes):
                B[tx * lanes + i] = A[tx * lanes + i] + T.cast(1, dtype)

    return main


def broadcast_kernel(dtype: str, lanes: int) -> Any:
    """Each thread copies one element it loaded into a variable to ``lanes`` outputs."""
    n = THREADS * lanes

    @T.prim_func
    def main(A: T.Tensor((THREADS,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            v = T.alloc_var(dtype)
            v = A[tx]
            for i in T.vectorized(lanes):
                B[tx * lanes + i] = v

    return main


def _values(dtype: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(n)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        out = rng.integers(info.min, int(info.max) + 1, n).astype(dtype)
        out[:2] = (info.max, info.min)  # 1 added to the largest wraps around
        return out
    return rng.standard_normal(n).astype(dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("dtype", "lanes"),
    [("int8", 32), ("uint8", 64), ("int16", 16), ("float16", 32), ("float32", 128), ("int8", 24)],
)
def test_wide_vectorized_loop_matches_numpy(target: dict[str, str], dtype: str, lanes: int) -> None:
    kernel = compile_for(add_one_kernel(dtype, lanes), target)
    a = _values(dtype, THREADS * lanes)
    expected = (a + np.array(1, dtype=dtype)).astype(dtype)  # wraps like the device's 8/16-bit sum
    np.testing.assert_array_equal(kernel(a), expected)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("dtype", "lanes"), [("int8", 4), ("int8", 32), ("uint8", 8), ("int16", 2), ("int16", 16)]
)
def test_variable_narrow_broadcast_matches_numpy(target: dict[str, str], dtype: str, lanes: int) -> None:
    kernel = compile_for(broadcast_kernel(dtype, lanes), target)
    a = _values(dtype, THREADS)
    np.testing.assert_array_equal(kernel(a), np.repeat(a, lanes))


def row_sum_kernel(k: int, into_local: bool) -> Any:
    """Each thread sums its row in a vectorized loop into one element (global or local)."""

    @T.prim_func
    def main(A: T.Tensor((THREADS, k), "float32"), B: T.Tensor((THREADS,), "float32")):
        with T.Kernel(1, threads=THREADS):
            row = T.get_thread_binding(0)
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            B[row] = 0.0
            for j in T.vectorized(k):
                if into_local:
                    acc[0] = acc[0] + A[row, j]
                else:
                    B[row] = B[row] + A[row, j]
            if into_local:
                B[row] = acc[0]

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("into_local", [False, True], ids=["global", "local"])
def test_vectorized_loop_into_one_element_sums_in_order(target: dict[str, str], into_local: bool) -> None:
    """A store its loop variable does not index runs serially (vectorized, one lane's sum survived)."""
    kernel = compile_for(row_sum_kernel(8, into_local), target)
    a = np.arange(THREADS * 8, dtype=np.float32).reshape(THREADS, 8)  # small integers: exact sums
    np.testing.assert_array_equal(kernel(a), a.sum(axis=1))


def ramp_kernel(dtype: str, lanes: int, start: int, step: int, from_input: bool) -> Any:
    """Lane ``i`` of each thread stores ``start + step * i`` (plus ``A[tx]`` when ``from_input``)
    cast to ``dtype``: a vectorized ramp of ``dtype``."""
    n = THREADS * lanes

    @T.prim_func
    def main(A: T.Tensor((THREADS,), "int32"), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding(0)
            for i in T.vectorized(lanes):
                if from_input:
                    B[tx * lanes + i] = T.cast(A[tx] + start + step * i, dtype)
                else:
                    B[tx * lanes + i] = T.cast(start + step * i, dtype)

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("from_input", [False, True], ids=["constant", "variable"])
@pytest.mark.parametrize(("dtype", "lanes"), [("int8", 4), ("uint8", 4), ("int8", 16)])
def test_narrow_ramp_matches_numpy(target: dict[str, str], dtype: str, lanes: int, from_input: bool) -> None:
    """A 4-lane 8-bit ramp printed as ``make_int(...)``/``make_uint(...)``, defined nowhere."""
    start, step = 126, 3  # lanes 1.. of an int8 ramp from 126 wrap past 127
    kernel = compile_for(ramp_kernel(dtype, lanes, start, step, from_input), target)
    a = np.arange(THREADS, dtype=np.int32) * 37 - 500
    offsets = a[:, None] if from_input else np.zeros((THREADS, 1), np.int64)
    expected = (offsets + start + step * np.arange(lanes)).astype(dtype).reshape(-1)  # wraps mod 2**bits
    np.testing.assert_array_equal(kernel(a), expected)


CUDA = TARGETS[0].values[0]
"""The wide-store tests compile for CUDA only (the emulator tests above also run ROCm): each
kernel costs a compile, and the rewrite is the same for both."""


def wide_broadcast_kernel(dtype: str, lanes: int, constant: float) -> Any:
    """Two ``T.Broadcast`` stores into a ``lanes``-wide local vector, one statement each (TileLang's
    issue 2480 form): ``A[0]`` into ``B[:lanes]`` and the literal ``constant`` into ``B[lanes:]``."""

    @T.prim_func
    def main(A: T.Tensor((1,), dtype), B: T.Tensor((2 * lanes,), dtype)):
        with T.Kernel(1, threads=1):
            packed = T.alloc_local((2 * lanes,), dtype)
            packed[0:lanes] = T.Broadcast(A[0], lanes)
            packed[lanes : 2 * lanes] = T.Broadcast(T.cast(constant, dtype), lanes)
            for i in T.serial(2 * lanes):
                B[i] = packed[i]

    return main


def _numpy_dtype(dtype: str) -> Any:
    if dtype == "bfloat16":
        return pytest.importorskip("ml_dtypes").bfloat16
    return np.dtype(dtype)


@pytest.mark.parametrize(
    ("dtype", "lanes", "value", "constant", "packed_words"),
    [
        ("int8", 32, -37, 90, "make_longlong4"),  # 256 bits: four packed 64-bit words, one store
        ("uint8", 32, 213, 7, "make_ulonglong4"),
        ("bfloat16", 16, 2.75, -3.0, "make_ulonglong4"),
        ("float32", 8, 0.1, -7.5, None),  # two 128-bit stores; TVM printed make_float4 with eight arguments
    ],
)
def test_wide_broadcast_store_matches_numpy(
    dtype: str, lanes: int, value: float, constant: float, packed_words: str | None
) -> None:
    """A broadcast store wider than 128 bits ("Cannot convert type T.int8x32 to CUDA type")."""
    kernel = compile_for(wide_broadcast_kernel(dtype, lanes, constant), CUDA)
    np_dtype = _numpy_dtype(dtype)
    expected = np.concatenate([np.full(lanes, value, np_dtype), np.full(lanes, constant, np_dtype)])
    np.testing.assert_array_equal(kernel(np.array([value], dtype=np_dtype)), expected)
    if packed_words is not None:
        assert kernel.get_kernel_source().count(packed_words) == 2


def overlapping_shift_kernel(lanes: int) -> Any:
    """``S[16 : 16 + lanes] = S[0 : lanes] + A[16 : 16 + lanes]`` as one int8 vector statement."""
    n = lanes + 16

    @T.prim_func
    def main(A: T.Tensor((n,), "int8"), B: T.Tensor((n,), "int8")):
        with T.Kernel(1, threads=1):
            s = T.alloc_local((n,), "int8")
            for i in T.serial(n):
                s[i] = A[i]
            s[T.Ramp(16, 1, lanes)] = s[T.Ramp(0, 1, lanes)] + A[T.Ramp(16, 1, lanes)]
            for i in T.serial(n):
                B[i] = s[i]

    return main


def test_wide_store_reading_what_it_overwrites_matches_numpy() -> None:
    """Split into 128-bit chunks, the second chunk reads lanes the first one stores: every chunk
    is read before any is stored, as the one vector statement did."""
    lanes = 32
    kernel = compile_for(overlapping_shift_kernel(lanes), CUDA)
    a = _values("int8", lanes + 16)
    expected = a.copy()
    expected[16:] = a[:lanes] + a[16:]  # wraps like the device's int8 sum
    np.testing.assert_array_equal(kernel(a), expected)


def fp8_count_kernel(dtype: str, lanes: int) -> Any:
    """``A[i] = i + 1`` cast to an fp8 type over ``T.vectorized(lanes)`` (TileLang's vectorize test)."""

    @T.prim_func
    def main(A: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.vectorized(lanes):
                A[i] = T.cast(i + 1, dtype)

    return main


def test_one_lane_fp8_cast_of_a_constant_compiles() -> None:
    """With one lane the loop variable is 0 and the fp8 encoding reinterprets the constant 1.0f:
    TVM printed ``*(uint *)(&(1.000000e+00f))``, the address of a literal (nvcc: "expression must
    be an lvalue"); the reinterpret of a constant is folded to its bits."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    kernel = tilelang.compile(fp8_count_kernel("float8_e4m3fn", 1), target={"kind": "cuda", "arch": "sm_90a"})
    out = np.zeros(8, ml_dtypes.float8_e4m3fn)
    kernel(out)
    expected = np.zeros(8, ml_dtypes.float8_e4m3fn)
    expected[0] = 1.0
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))
