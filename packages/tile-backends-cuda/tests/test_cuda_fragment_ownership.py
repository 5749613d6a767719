"""A T.Parallel loop reads a fragment element only on a thread that holds it.

``scale[i, 0]`` of a ``(64, 1)`` fragment is not indexed by the loop's variables alone, so
the fragment keeps a layout of its own (from its ``T.copy``) and row ``i`` can sit on
another thread than iteration ``(i, j)``: on sm_80 the read returned that thread's unrelated
register (a silent wrong result; tile-ops' dequant scales hit it). A read the placement cannot
vouch for (``s[63 - i]``) is a typed error at the loop's line; the column form runs right since
session 26 (a constant 0 at a unit dim takes no part in the placement), as does the 1-D form.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import LayoutInferenceError

SM80 = {"kind": "cuda", "arch": "sm_80"}


def row_scale(column: bool):  # type: ignore[no-untyped-def]
    shape = (64, 1) if column else (64,)

    @T.prim_func
    def scale(
        X: T.Tensor((64, 64), "float32"), S: T.Tensor(shape, "float32"), Y: T.Tensor((64, 64), "float32")
    ):
        with T.Kernel(1, threads=128):
            s = T.alloc_fragment(shape, "float32")
            x = T.alloc_fragment((64, 64), "float32")
            T.copy(S, s)
            T.copy(X, x)
            for i, j in T.Parallel(64, 64):
                x[i, j] = x[i, j] * (s[i, 0] if column else s[i])
            T.copy(x, Y)

    return scale


def reversed_scale():  # type: ignore[no-untyped-def]
    @T.prim_func
    def scale(
        X: T.Tensor((64, 64), "float32"), S: T.Tensor((64,), "float32"), Y: T.Tensor((64, 64), "float32")
    ):
        with T.Kernel(1, threads=128):
            s = T.alloc_fragment((64,), "float32")
            x = T.alloc_fragment((64, 64), "float32")
            T.copy(S, s)
            T.copy(X, x)
            for i, j in T.Parallel(64, 64):
                x[i, j] = x[i, j] * s[63 - i]
            T.copy(x, Y)

    return scale


def test_a_fragment_read_at_another_rows_index_is_refused_at_its_line() -> None:
    with pytest.raises(LayoutInferenceError) as caught:
        tilelang.compile(reversed_scale(), target=SM80)
    error = caught.value
    assert "s[63 - i]" in error.message and "index s by the loop variables" in (error.hint or "")
    assert error.location is not None and error.location.filename == __file__


def test_a_column_fragment_read_at_its_unit_dim_runs_right(monkeypatch: pytest.MonkeyPatch) -> None:
    # s[i, 0] of a (64, 1) fragment was refused (session 12); since session 26 a constant 0 at a
    # unit dim takes no part in the placement: the nest places s through its other dim
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(row_scale(column=True), target=SM80)
    rng = np.random.default_rng(1)
    x, s = rng.random((64, 64), dtype=np.float32), rng.random((64, 1), dtype=np.float32)
    y = np.zeros((64, 64), np.float32)
    kernel(x, s, y)
    np.testing.assert_allclose(y, x * s, rtol=1e-6)


def test_the_one_dimensional_form_runs_right_under_the_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(row_scale(column=False), target=SM80)
    rng = np.random.default_rng(0)
    x, s = rng.random((64, 64), dtype=np.float32), rng.random(64, dtype=np.float32)
    y = np.zeros((64, 64), np.float32)
    kernel(x, s, y)
    np.testing.assert_allclose(y, x * s[:, None], rtol=1e-6)
