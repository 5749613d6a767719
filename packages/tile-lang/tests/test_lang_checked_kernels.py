"""``TILE_CHECK=1``: out-of-bounds accesses on the CPU backend are typed errors at the kernel's line.

Without checks, an unguarded store past a tensor's end corrupted the heap (the process died
with ``free(): corrupted unsorted chunks``) and a read past it went unnoticed (issue 17). Since
tile follows TileLang's rule that such a global access does nothing (test_lang_safe_memory.py),
the kernels here that must fault turn that rule off (``UNGUARDED``): the checks then see the
accesses as written.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu.simt import SimtFault
from tile.lang.errors import KernelBoundsError
from tile.testsupport.markers import needs_host_cxx

UNGUARDED = {"tl.disable_safe_memory_legalize": True}
"""TileLang's pass config: global accesses run as written, none guarded by its tensor's shape."""


def shifted_store(n: int, shift: int):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i + shift] = A[bx * 32 + i]

    return main


def shared_shifted_read(n: int):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            s = T.alloc_shared((32,), "float32")
            for i in T.Parallel(32):
                s[i] = A[bx * 32 + i]
            for i in T.Parallel(32):
                B[bx * 32 + i] = s[i + 1] * 2.0

    return main


def guarded_relu(M: int, N: int):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 16), threads=32) as (bx, by):
            tile = T.alloc_shared((16, 16), "float32")
            T.copy(X[by * 16, bx * 16], tile)  # a ragged edge: the copy guards itself
            for i, j in T.Parallel(16, 16):
                r = by * 16 + i
                c = bx * 16 + j
                if r < M and c < N:
                    Y[r, c] = T.max(tile[i, j], 0.0)

    return main


def line_of(text: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line and "line_of" not in line)


@pytest.fixture
def checking(monkeypatch):
    monkeypatch.setenv("TILE_CHECK", "1")


def test_an_out_of_bounds_store_names_tensor_index_block_and_line(checking):
    kernel = tilelang.compile(shifted_store(64, 5), target="cpu", pass_configs=UNGUARDED)
    want = r"store of B\[64\] in block \(1, 0, 0\): B has shape \(64\)"
    with pytest.raises(KernelBoundsError, match=want) as info:
        kernel(np.arange(64, dtype="float32"), np.zeros(64, "float32"))
    assert info.value.location.filename == __file__
    assert info.value.location.line == line_of("B[bx * 32 + i + shift] = A")


def test_an_out_of_bounds_shared_read_is_reported(checking):
    kernel = tilelang.compile(shared_shifted_read(64), target="cpu")
    with pytest.raises(KernelBoundsError, match=r"load of s\[32\]") as info:
        kernel(np.arange(64, dtype="float32"), np.zeros(64, "float32"))
    assert info.value.location.line == line_of("B[bx * 32 + i] = s[i + 1]")


def test_the_old_name_tile_emu_check_turns_checks_on_too(monkeypatch):
    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    kernel = tilelang.compile(shifted_store(64, 1), target="cpu", pass_configs=UNGUARDED)
    with pytest.raises(KernelBoundsError):
        kernel(np.arange(64, dtype="float32"), np.zeros(64, "float32"))


@pytest.mark.parametrize("shape", [(32, 48), (21, 37)])
def test_guarded_kernels_run_unchanged_under_checks(checking, shape):
    kernel = tilelang.compile(guarded_relu(*shape), target="cpu")
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    y = np.full(shape, -5.0, "float32")
    kernel(x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0.0))
    kernel(x, y)  # a check that passed leaves nothing behind


def test_the_same_kernel_file_at_two_paths_names_its_own_path(checking, tmp_path, monkeypatch):
    # the checks carry file:line, so a cached checked kernel from an identical file elsewhere
    # (a second clone of a project) must not be reused: it would name the other file
    import importlib.util
    import inspect
    import textwrap

    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    text = "import tile.lang.language as T\n\n" + textwrap.dedent(inspect.getsource(shifted_store))
    found = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "kernels.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"checked_copy_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        kernel = tilelang.compile(module.shifted_store(64, 5), target="cpu", pass_configs=UNGUARDED)
        with pytest.raises(KernelBoundsError) as info:
            kernel(np.arange(64, dtype="float32"), np.zeros(64, "float32"))
        found.append(info.value.location.filename)
    assert found == [str(tmp_path / "one" / "kernels.py"), str(tmp_path / "two" / "kernels.py")]


EMULATED = [
    pytest.param({"kind": "cuda", "arch": "sm_80"}, shifted_store(64, 5), "B[bx * 32 + i + shift] = A",
                 r"out-of-bounds global write of 4 bytes .* of tensor B .* by thread \d+", id="cuda-emu"),
    pytest.param({"kind": "hip", "arch": "gfx90a"}, shared_shifted_read(64), "B[bx * 32 + i] = s[i + 1]",
                 r"out-of-bounds shared memory read of 4 bytes at offset 128 by thread 31", id="rocm-emu"),
]  # fmt: skip


@needs_host_cxx
@pytest.mark.parametrize(("target", "func", "statement", "message"), EMULATED)
def test_an_emulator_fault_names_the_kernels_line(checking, monkeypatch, target, func, statement, message):
    # under the GPU emulator too, a checked kernel's fault is located at the user's Python line
    # (the generated source's line stays in the message)
    pytest.importorskip(f"tile.backends.{'cuda' if target['kind'] == 'cuda' else 'rocm'}")
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(func, target=target, pass_configs=UNGUARDED)
    assert "tile::kernel_line(" in kernel.get_kernel_source()
    with pytest.raises(SimtFault, match=message) as info:
        kernel(np.arange(64, dtype="float32"), np.zeros(64, "float32"))
    assert (info.value.location.filename, info.value.location.line) == (__file__, line_of(statement))
    assert "block (" in str(info.value) and "(line " in str(info.value)  # the block; the generated line


def test_unchecked_gpu_kernels_carry_no_line_marks(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(shifted_store(64, 0), target={"kind": "cuda", "arch": "sm_80"})
    source = kernel.get_kernel_source()
    assert "B_ptr[" in source and "kernel_line" not in source


def branch_race(n: int = 256):
    # warps 0-3 fill s in one branch, warps 4-7 read it in the other: nothing orders the two
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n):
            s = T.alloc_shared((n // 2,), "float32")
            tx = T.get_thread_binding()
            if tx < n // 2:
                s[tx] = A[tx]
            else:
                B[tx] = s[tx - n // 2] + 1.0

    return main


@needs_host_cxx
def test_a_fault_inside_a_branch_is_located_at_the_branchs_statement(checking, monkeypatch):
    # the statements of an `if` on the thread index carry their own lines (they ran under the
    # line of the last statement before the `if`, which named the wrong place)
    pytest.importorskip("tile.backends.cuda")
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.delenv("TILE_EMU_SEED", raising=False)
    kernel = tilelang.compile(branch_race(), target={"kind": "cuda", "arch": "sm_90a"})
    with pytest.raises(SimtFault, match=r"race on shared memory: thread 128 reads offset 0") as info:
        kernel(np.arange(256, dtype="float32"), np.zeros(256, "float32"))
    where = (info.value.location.filename, info.value.location.line)
    assert where == (__file__, line_of("B[tx] = s[tx - n // 2]"))
