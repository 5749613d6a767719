"""The plugin's session report: per-test example counts, family minimum, failure reproducer."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import numpy as np
from hypothesis import given, settings, strategies as st

import tile.lang.language as T


def add_kernel(n, c):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            F = T.alloc_fragment((n,), "float32")
            T.copy(A, F)
            for i in T.Parallel(n):
                F[i] = F[i] + c
            T.copy(F, B)

    return main


@settings(max_examples=7)
@given(x=st.integers(0, 100))
def test_counts(tile_backend, x):
    kernel = tile_backend.build(add_kernel, 4, 1.0, out_idx=(-1,))
    np.testing.assert_allclose(kernel(np.full(4, x, "float32")), x + 1.0)


@settings(max_examples=5)
@given(c=st.sampled_from([1.0, 2.0]))
def test_wrong(tile_backend, c):
    kernel = tile_backend.build(add_kernel, 4, c, out_idx=(-1,))
    np.testing.assert_allclose(kernel(np.zeros(4, "float32")), 1.0)
"""


def test_counts_per_test_and_family_and_reproducer(pytester: pytest.Pytester, tile_backend) -> None:
    pytester.makepyfile(test_conf_demo=SUITE)
    result = pytester.runpytest(f"--tile-backend={tile_backend.name}", "--tile-min-examples=3",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*tile conformance: examples executed*",
        "*test_conf_demo.py::test_counts*7",
        "*per family (minimum 3)*",
        "*demo*",
    ])
    # the minimal failing example's kernel: the factory call with its arguments, and its TVMScript
    result.stdout.fnmatch_lines([
        "*tile reproducer*",
        "kernel = tilelang.compile(test_conf_demo.add_kernel(4, 2.0), out_idx=(-1,))",
        "*def main(A*",
    ])


def test_family_below_the_minimum_fails_the_run(pytester: pytest.Pytester, tile_backend) -> None:
    pytester.makepyfile(test_conf_demo=SUITE)
    result = pytester.runpytest(f"--tile-backend={tile_backend.name}", "--tile-min-examples=1000",
                                "-k", "test_counts", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*families below the example minimum: demo: * < 1000*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
