"""User mistakes raise typed errors that point at the offending line of the kernel."""

import inspect

import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.lang import TileParseError, TileScopeError


def line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if needle in text)


def test_alloc_fragment_outside_kernel():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            F = T.alloc_fragment((32,), "float32")
            T.clear(F)

        return k

    with pytest.raises(TileScopeError) as info:
        build()
    assert info.value.location.line == line_of(build, "alloc_fragment((32,)")


def test_tvmscript_errors_keep_their_text():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as _bx:
                A[0] = undefined_name  # noqa: F821

        return k

    with pytest.raises(TileParseError) as info:
        build()
    assert "undefined_name" in str(info.value)


def test_thread_id_on_cpu_is_rejected_at_the_read():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            tx = T.get_thread_binding()
            A[tx] = 1.0

    with pytest.raises(UnsupportedOnTargetError) as info:
        tilelang.compile(k, target="cpu")
    assert info.value.location.line == line_of(
        test_thread_id_on_cpu_is_rejected_at_the_read, "get_thread_binding()"
    )
