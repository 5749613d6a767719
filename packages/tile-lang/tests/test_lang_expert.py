"""Expert tier: T.import_source + T.call_extern on the CPU, and the tier's module."""

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
import tile.lang.language.expert as TX
from tile.ir.errors import BackendError
from tile.lang.errors import ImportSourceError, TileTypeError
from tile.testsupport.markers import needs_host_cc

needs_cc = needs_host_cc

SOURCE = """
float tile_test_softplus_ish(float x, float bias) { return (x > 0.0f ? x : 0.0f) * 2.0f + bias; }
int tile_test_popcount(int x) { return __builtin_popcount((unsigned)x); }
"""


def extern_kernel(n, block):
    @T.prim_func
    def kernel(
        A: T.Tensor((n,), "float32"),
        X: T.Tensor((n,), "int32"),
        B: T.Tensor((n,), "float32"),
        C: T.Tensor((n,), "int32"),
    ):
        T.import_source(SOURCE)
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = T.call_extern(
                        "float32", "tile_test_softplus_ish", A[bx * block + i], 0.5
                    )
                    C[bx * block + i] = TX.call_extern(T.int32, "tile_test_popcount", X[bx * block + i])

    return kernel


@needs_cc
def test_imported_c_function_in_a_parallel_body_matches_numpy():
    n = 100
    kernel = tilelang.compile(extern_kernel(n, 16), out_idx=[2, 3], target="cpu")
    rng = np.random.default_rng(5)
    a = rng.standard_normal(n).astype("float32")
    x = rng.integers(0, 1 << 20, n).astype("int32")
    b, c = kernel(a, x)
    np.testing.assert_allclose(b, np.maximum(a, 0) * 2 + 0.5, rtol=1e-6)
    np.testing.assert_array_equal(c, [bin(int(v)).count("1") for v in x])
    assert "tile_test_softplus_ish" in str(kernel.func.attrs["tile.imported_sources"][0])


@needs_cc
def test_bad_c_source_is_a_typed_error_at_compile_with_compiler_output():
    @T.prim_func  # the code is compiled with the kernel, for the target's language
    def bad(A: T.Tensor((4,), "float32")):
        T.import_source("this is not C;")  # the line the error names
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                A[i] = 0.0

    with pytest.raises(ImportSourceError, match="rejected") as info:
        tilelang.compile(bad, target="cpu")
    assert "the line the error names" in (info.value.location.source_line or "")


def test_call_extern_takes_the_dtype_first_or_as_a_keyword():
    # TileLang's dequantizing GEMMs write T.call_extern(name, *args, dtype=out_dtype)
    first = T.call_extern("float32", "tile_test_f", 1, 2)
    keyword = T.call_extern("tile_test_f", 1, 2, dtype="float32")
    assert str(first) == str(keyword) == 'T.call_extern("float32", "tile_test_f", 1, 2)'
    with pytest.raises(TileTypeError, match="needs a function name, got 3"):
        T.call_extern("float32", 3)


def test_import_source_of_none_imports_nothing():
    # TileLang's dequantizing GEMV passes its optional source unconditionally
    @T.prim_func
    def kernel(A: T.Tensor((4,), "float32")):
        T.import_source(None)
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                A[i] = 1.0

    assert "tile.imported_sources" not in (kernel.attrs or {})


def test_missing_compiler_has_a_hint(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ImportSourceError, match="C compiler") as info:
        from tile.lang._src.expert import load_c_source

        load_c_source(f"int tile_test_never_compiled_{id(info)}(void) {{ return 0; }}")
    assert "install" in str(info.value)


def test_expert_tier_is_its_own_module_with_a_policy():
    assert "API policy" in (TX.__doc__ or "")
    assert "API policy" in (T.__doc__ or "")
    assert set(TX.__all__) >= {"get_thread_binding", "import_source", "call_extern", "Layout", "Fragment"}
    assert TX.get_thread_binding is T.get_thread_binding


@needs_cc
def test_call_extern_in_a_vectorized_parallel_loop():
    @T.prim_func
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        T.import_source("float tile_test_square_plus_one(float x) { return x * x + 1.0f; }")
        with T.Kernel(4, threads=32) as bx:
            for i in T.Parallel(16):
                B[bx * 16 + i] = T.call_extern("float32", "tile_test_square_plus_one", A[bx * 16 + i])

    a = np.arange(64, dtype="float32")
    np.testing.assert_allclose(tilelang.compile(kernel, out_idx=[1], target="cpu")(a), a * a + 1)



def _calling_by_name(name):
    @T.prim_func
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = T.call_pure_extern("float32", name, A[i])

    return kernel


def test_call_of_an_undefined_function_is_a_typed_error_not_a_crash():
    # LLVM's JIT resolved the missing symbol to nothing and the first call segfaulted
    with pytest.raises(BackendError, match=r"calls `tile_test_no_such_function`.*no library") as info:
        tilelang.compile(_calling_by_name("tile_test_no_such_function"), out_idx=[1], target="cpu")
    assert "T.import_source" in info.value.hint


def test_call_of_a_libm_function_by_name_still_runs():
    a = np.linspace(-1, 1, 64, dtype="float32")
    kernel = tilelang.compile(_calling_by_name("expm1f"), out_idx=[1], target="cpu")
    np.testing.assert_allclose(kernel(a), np.expm1(a), rtol=1e-6)
