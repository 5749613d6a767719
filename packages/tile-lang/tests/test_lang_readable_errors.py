"""Errors people can read: short tracebacks, "did you mean", keyword and target suggestions."""

import os
import subprocess
import sys
import textwrap

import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TargetError
from tile.lang.errors import UnknownKeywordError, UnknownNameError

BAD_GEMM = textwrap.dedent(
    """\
    import tile.lang as tilelang
    import tile.lang.language as T

    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 64), "float32"),
                 C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                a = T.alloc_shared((64, 32), "float32")
                b = T.alloc_shared((64, 64), "float32")
                c = T.alloc_fragment((64, 64), "float32")
                T.copy(A, a)
                T.copy(B, b)
                T.gemm(a, b, c)
                T.copy(c, C)
        return tilelang.compile(main, out_idx=[-1], target="cpu")

    build()
    """
)


def run_script(tmp_path, text, **env):
    script = tmp_path / "user_kernel.py"
    script.write_text(text)
    environ = {**os.environ, **env}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environ,
                          timeout=240)


def test_a_user_mistake_prints_under_40_lines_with_the_users_frames_only(tmp_path):
    result = run_script(tmp_path, BAD_GEMM, TILE_TRACEBACK="short")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) < 40, result.stderr
    assert "TileShapeError: T.gemm shapes disagree: K of A is 32 but K of B is 64" in result.stderr
    assert "14 |             T.gemm(a, b, c)" in result.stderr  # the kernel line, with a caret below
    assert 'user_kernel.py", line 18, in <module>' in result.stderr  # the user's frames stay
    assert 'user_kernel.py", line 5, in build' in result.stderr
    frames = [ln for ln in lines if ln.startswith('  File "')]
    internal = [ln for ln in frames if "user_kernel.py" not in ln]
    assert len(internal) <= 1, internal  # at most the boundary's re-raise, which names TILE_TRACEBACK
    assert "TILE_TRACEBACK=full" in result.stderr


def test_tile_traceback_full_shows_every_frame(tmp_path):
    result = run_script(tmp_path, BAD_GEMM, TILE_TRACEBACK="full")
    assert result.returncode == 1
    assert "tile/ir/ops/gemm.py" in result.stderr and "tvm/script/parser" in result.stderr
    assert len(result.stderr.splitlines()) > 40


def test_a_misspelled_language_name_suggests_the_right_one():
    with pytest.raises(UnknownNameError) as info:

        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Paralel(64):
                    C[i] = A[i]

    assert "did you mean `T.Parallel`?" in str(info.value)
    assert info.value.location is not None and "T.Paralel(64)" in (info.value.location.source_line or "")
    assert not hasattr(T, "Paralel") and isinstance(info.value, AttributeError)


def test_a_misspelled_name_added_later_is_suggested_too(monkeypatch):
    monkeypatch.setattr(T, "brand_new_op", lambda: None, raising=False)
    with pytest.raises(UnknownNameError, match="brand_new_op"):
        T.brand_new_opp  # noqa: B018


def test_a_misspelled_keyword_of_a_language_call_suggests_the_parameter():
    with pytest.raises(UnknownKeywordError) as info:

        @T.prim_func
        def main(A: T.Tensor((8, 8), "float32"), C: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                a = T.alloc_fragment((8, 8), "float32")
                c = T.alloc_fragment((8,), "float32")
                T.copy(A, a)
                T.reduce_max(a, c, dims=1)
                T.copy(c, C)

    text = str(info.value)
    assert "T.reduce_max got an unknown keyword argument 'dims'" in text and "did you mean `dim`?" in text
    assert "T.reduce_max(a, c, dims=1)" in text


def test_a_misspelled_gemm_keyword_suggests_the_parameter():
    with pytest.raises(UnknownKeywordError, match="did you mean `transpose_B`"):

        @T.prim_func
        def main(A: T.Tensor((16, 16), "float32"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32):
                a = T.alloc_shared((16, 16), "float32")
                c = T.alloc_fragment((16, 16), "float32")
                T.copy(A, a)
                T.gemm(a, a, c, transpose_b=True)
                T.copy(c, C)


@T.prim_func
def add_one(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=16):
        for i in T.Parallel(16):
            B[i] = A[i] + 1.0


def test_misspelled_compile_and_jit_keywords_are_errors_with_suggestions():
    with pytest.raises(UnknownKeywordError, match="did you mean `out_idx`"):
        tilelang.compile(add_one, out_ids=[-1], target="cpu")
    with pytest.raises(UnknownKeywordError, match="did you mean `pass_configs`"):
        tilelang.jit(out_idx=[-1], pass_config={})
    # TileLang's own options are still accepted
    kernel = tilelang.compile(add_one, out_idx=[-1], target="cpu", execution_backend="cython", verbose=False)
    assert kernel is not None


def test_a_misspelled_target_suggests_an_installed_kind():
    with pytest.raises(TargetError, match="did you mean `cpu`"):
        tilelang.compile(add_one, out_idx=[-1], target="cpux")
