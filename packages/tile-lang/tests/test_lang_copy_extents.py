"""``T.copy`` between regions of different extents follows TileLang's rule, with a warning.

TileLang's language/copy test copies ``A[:, :2]`` into ``B[:, :3]`` and checks the first
column. The rule (TileLang's ``CopyNode``): the copy covers the region of the more local
operand (fragment, then shared, then global memory; the source's on a tie), each operand
from its own corner, and is refused when that would drop part of the source. tile issues
a ``TileWarning`` at the ``T.copy`` line, since such a copy is rarely meant. Results are
checked against numpy on the CPU and on both GPU emulators.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import TileShapeError, TileWarning

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="cuda-emu"),
    pytest.param({"kind": "hip", "arch": "gfx90a"}, id="rocm-emu"),
]


def _target(target, monkeypatch):
    if isinstance(target, dict):
        pytest.importorskip(f"tile.backends.{'cuda' if target['kind'] == 'cuda' else 'rocm'}")
        monkeypatch.setenv("TILE_DEVICE", "emu")
    return target


def _global_to_global(m: int, n: int) -> T.PrimFunc:
    @T.prim_func
    def main(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=128):
            T.copy(A[:, :2], B[:, :3])

    return main


def _global_to_larger_shared(n: int) -> T.PrimFunc:
    @T.prim_func
    def main(A: T.Tensor((n, n), "float32"), B: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((n, n), "float32")
            T.fill(S, -1.0)
            T.copy(A[0 : n // 2, 0:n], S)
            T.copy(S, B)

    return main


@pytest.mark.parametrize("target", TARGETS)
def test_a_tie_copies_the_source_region(target, monkeypatch) -> None:
    target = _target(target, monkeypatch)
    with pytest.warns(TileWarning, match=r"copying \(64, 2\), the source's region") as caught:
        func = _global_to_global(64, 16)
    assert caught[0].filename == __file__  # the kernel's line, not the compiler's
    with open(__file__) as source:
        line = next(i for i, text in enumerate(source, 1) if "T.copy(A[:, :2], B[:, :3])" in text)
    assert caught[0].lineno == line
    kernel = tilelang.compile(func, target=target)
    a = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)
    b = np.full((64, 16), 7.0, np.float32)
    kernel(a, b)
    expected = np.full((64, 16), 7.0, np.float32)
    expected[:, :2] = a[:, :2]  # two columns; the destination's third stays as it was
    np.testing.assert_array_equal(b, expected)


@pytest.mark.parametrize("target", TARGETS)
def test_a_more_local_destination_copies_its_own_region(target, monkeypatch) -> None:
    target = _target(target, monkeypatch)
    with pytest.warns(TileWarning, match=r"copying \(32, 32\), the destination's region"):
        func = _global_to_larger_shared(32)
    kernel = tilelang.compile(func, out_idx=[1], target=target)
    a = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a)  # all 32 rows, from A's corner


def test_a_smaller_more_local_destination_is_refused_at_its_line() -> None:
    with pytest.raises(TileShapeError) as info:

        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((32, 32), "float32")
                T.copy(A[0:32, 0:64], S)

    assert "drop part of the source" in info.value.message
    where = info.value.location
    assert where is not None and "T.copy(A[0:32, 0:64], S)" in (where.source_line or "")


def test_equal_extents_do_not_warn() -> None:
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            T.copy(A[0:64, 0:8], B[0:64, 8:16])

    with warnings.catch_warnings():
        warnings.simplefilter("error", TileWarning)
        tilelang.compile(main, target="cpu")
