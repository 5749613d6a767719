"""TileLang's rule: a global access outside its tensor does nothing (``guard_global_accesses``).

A store whose index falls past its tensor's end is dropped and such a load reads 0, on every
backend. (A negative index is another matter: TVMScript's parser wraps it, as Python does.)
TileLang's grouped GEMM stores a 64-column tile into a 96-column output with a row guard only;
before the rule, tile wrote the other 32 columns past the end of the output (the CPU
emulator's heap: ``malloc(): unaligned tcache chunk detected``, the process aborted).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import KernelBoundsError
from tile.testsupport.markers import needs_host_cxx

CPU = "cpu"
SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90A = {"kind": "cuda", "arch": "sm_90a"}
GFX90A = {"kind": "hip", "arch": "gfx90a"}
TARGETS = [
    pytest.param(CPU, id="cpu"),
    pytest.param(SM80, id="sm_80-emu", marks=needs_host_cxx),
    pytest.param(GFX90A, id="gfx90a-emu", marks=needs_host_cxx),
]


@pytest.fixture
def on(monkeypatch):
    def compile_for(func, target, **options):
        if target != CPU:
            pytest.importorskip(f"tile.backends.{'cuda' if target['kind'] == 'cuda' else 'rocm'}")
            monkeypatch.setenv("TILE_DEVICE", "emu")
        return tilelang.compile(func, target=target, **options)

    return compile_for


def shifted(n: int, store_shift: int, load_shift: int, block: int = 32):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i + store_shift] = A[bx * block + i + load_shift] + 1.0

    return main


def shifted_reference(
    a: np.ndarray, b: np.ndarray, store_shift: int, load_shift: int, block: int
) -> np.ndarray:
    out = b.copy()
    n = a.shape[0]
    for p in range(-(-n // block) * block):
        dst, src = p + store_shift, p + load_shift
        if 0 <= dst < n:
            out[dst] = (a[src] if 0 <= src < n else 0.0) + 1.0
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("n", "store_shift", "load_shift"),
    [(64, 5, 0), (64, 0, 7), (50, 0, 0), (50, 4, 3), (50, 3, 9)],
)
def test_accesses_outside_a_tensor_do_nothing(on, target, n, store_shift, load_shift):
    kernel = on(shifted(n, store_shift, load_shift), target)
    a = np.arange(1, n + 1, dtype="float32")
    b = np.full(n, -7.0, "float32")
    kernel(a, b)
    want = shifted_reference(a, np.full(n, -7.0, "float32"), store_shift, load_shift, 32)
    np.testing.assert_array_equal(b, want)


def test_checks_do_not_report_a_guarded_access(monkeypatch):
    # TILE_CHECK=1 sees the accesses as they run: the dropped store touches nothing
    monkeypatch.setenv("TILE_CHECK", "1")
    kernel = tilelang.compile(shifted(64, 5, 0), target=CPU)
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, shifted_reference(a, np.zeros(64, "float32"), 5, 0, 32))


def test_the_pass_config_turns_the_rule_off(monkeypatch):
    # TileLang's key: accesses run as written, so a checked kernel reports the store
    monkeypatch.setenv("TILE_CHECK", "1")
    off = {tilelang.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}
    kernel = tilelang.compile(shifted(64, 5, 0), target=CPU, pass_configs=off)
    with pytest.raises(KernelBoundsError, match=r"store of B\[64\]"):
        kernel(np.arange(64, dtype="float32"), np.zeros(64, "float32"))


@needs_host_cxx
def test_provable_accesses_get_no_guard(on):
    # a tile that divides its tensor, and a kernel that guards itself, keep their code
    @T.prim_func
    def exact(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i] * 2.0

    @T.prim_func
    def guarded(A: T.Tensor((50,), "float32"), B: T.Tensor((50,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < 50:
                    B[bx * 32 + i] = A[bx * 32 + i] * 2.0

    off = {tilelang.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}
    for func, n in ((exact, 64), (guarded, 50)):
        kernel = on(func, SM80)
        assert kernel.get_kernel_source() == on(func, SM80, pass_configs=off).get_kernel_source()
        a, b = np.arange(n, dtype="float32"), np.zeros(n, "float32")
        kernel(a, b)
        np.testing.assert_array_equal(b, a * 2.0)


def grouped_rows(groups: int, total: int, n: int, block_m: int, block_n: int):
    """TileLang's grouped GEMM epilogue: each block's rows start at an offset read from memory,
    a row guard only, and the last column block runs past ``n``."""

    @T.prim_func
    def main(
        X: T.Tensor((total, n), "float32"),
        offsets: T.Tensor((groups,), "int32"),
        sizes: T.Tensor((groups,), "int32"),
        Y: T.Tensor((total, n), "float32"),
    ):
        with T.Kernel(groups, T.ceildiv(n, block_n), threads=128) as (g, by):
            tile = T.alloc_fragment((block_m, block_n), "float32")
            start = offsets[g]
            rows = sizes[g]
            for i, j in T.Parallel(block_m, block_n):
                tile[i, j] = X[start + i, by * block_n + j] * 3.0
            for i, j in T.Parallel(block_m, block_n):
                if i < rows:
                    Y[start + i, by * block_n + j] = tile[i, j]

    return main


@pytest.mark.parametrize("target", [*TARGETS, pytest.param(SM90A, id="sm_90a", marks=needs_host_cxx)])
def test_a_row_guard_alone_keeps_a_ragged_column_block_inside(on, target):
    sizes = np.array([5, 9, 13], "int32")
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype("int32")
    total, n = int(sizes.sum()), 96
    kernel = on(grouped_rows(3, total, n, 16, 64), target)
    x = np.random.default_rng(3).standard_normal((total, n)).astype("float32")
    y = np.zeros((total, n), "float32")
    kernel(x, offsets, sizes, y)
    np.testing.assert_allclose(y, x * 3.0, rtol=1e-6)


@pytest.mark.parametrize("target", [*TARGETS, pytest.param(SM90A, id="sm_90a", marks=needs_host_cxx)])
@pytest.mark.parametrize("kind", ["add", "max"])
def test_an_atomic_update_past_the_end_is_dropped(on, target, kind):
    # a read-modify-write under one guard: the GPU lowering still finds the atomic (a guard on
    # its load alone turned atomic_add(&B[i], v) into atomic_add(&B[i], B[i]))
    update = T.atomic_add if kind == "add" else T.atomic_max

    @T.prim_func
    def scatter(A: T.Tensor((50,), "float32"), B: T.Tensor((10,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                update(B[(bx * 32 + i) % 13], A[bx * 32 + i])

    kernel = on(scatter, target)
    a = np.arange(1, 51, dtype="float32")
    b = np.zeros(10, "float32")
    kernel(a, b)
    want = np.zeros(10, "float32")
    for p in range(64):
        r, v = p % 13, (a[p] if p < 50 else 0.0)
        if r < 10:
            want[r] = want[r] + v if kind == "add" else max(want[r], v)
    np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("target", [*TARGETS, pytest.param(SM90A, id="sm_90a", marks=needs_host_cxx)])
def test_a_gathered_atomic_add_of_shared_values_adds_them(on, target):
    # TileLang's sparse MLA backward: T.atomic_add(dKV[Indices[...], g, d], staged[i, d]) with the
    # gathered row guarded (the index is read from memory). The guard wraps the update's read of
    # its own element; the GPU lowering took that read for the added value (a plain load of the
    # shared tile looked like the destination's) and added dKV to itself: nothing was added.
    @T.prim_func
    def gather_add(Idx: T.Tensor((4, 1, 32), "int32"), Val: T.Tensor((4, 32, 64), "float32"),
                   Out: T.Tensor((4, 1, 64), "float32")):  # fmt: skip
        with T.Kernel(4, 1, threads=128) as (bx, g):
            staged = T.alloc_shared((16, 64), "float32")
            for s in range(2):
                for i, d in T.Parallel(16, 64):
                    staged[i, d] = Val[bx, i + s * 16, d]
                for i, d in T.Parallel(16, 64):
                    T.atomic_add(Out[Idx[bx, g, i + s * 16], g, d], staged[i, d])

    kernel = on(gather_add, target)
    rng = np.random.default_rng(9)
    idx = rng.integers(0, 6, (4, 1, 32)).astype("int32")  # 4 and 5 fall past the end: dropped
    val = rng.standard_normal((4, 32, 64)).astype("float32")
    out = np.zeros((4, 1, 64), "float32")
    kernel(idx, val, out)
    want = np.zeros((6, 64), "float64")
    np.add.at(want, idx.reshape(-1), val.reshape(-1, 64).astype("float64"))
    np.testing.assert_allclose(out[:, 0], want[:4], rtol=1e-5, atol=1e-5)
