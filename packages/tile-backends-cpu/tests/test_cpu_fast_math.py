"""The CPU backend's inline float32 exp/exp2 against float64 numpy over the whole range."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T

SPECIALS = np.array(
    [
        np.nan,
        -np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        1e-30,
        -1e-30,
        1.0,
        -1.0,
        0.5,
        88.72283,
        88.72284,
        88.7229,
        89.0,
        89.5,
        1e4,
        3e38,
        -87.33654,
        -87.34,
        -100.0,
        -103.97,
        -103.98,
        -104.0,
        -104.5,
        -150.0,
        -1e4,
        -3e38,
    ],
    np.float32,
)


def unary_kernel(n: int, fn):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 1024), threads=128) as bx:
            x = T.alloc_fragment((1024,), "float32")
            T.copy(X[bx * 1024], x)
            for i in T.Parallel(1024):
                x[i] = fn(x[i])
            T.copy(x, Y[bx * 1024])

    return main


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the float32 spacing at the exact value (subnormals included)."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


@pytest.fixture(scope="module")
def inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    dense = np.linspace(-110.0, 95.0, 200_000, dtype=np.float32)  # every regime, incl. subnormal results
    small = rng.uniform(-1, 1, 50_000).astype(np.float32) * rng.choice([1e-3, 1e-6, 1.0], 50_000)
    return np.concatenate([dense, small.astype(np.float32), SPECIALS, SPECIALS + 0]).astype(np.float32)


@pytest.mark.parametrize(
    ("name", "fn", "exact", "limit"),
    [
        ("exp", T.exp, np.exp, 1.0),
        ("exp2", T.exp2, np.exp2, 2.0),
    ],
)
def test_fast_exp_matches_numpy_to_the_ulp(inputs, name, fn, exact, limit):
    with np.errstate(over="ignore"):
        x = inputs if name == "exp" else inputs * np.float32(1.4426950408889634)
    kernel = tilelang.compile(unary_kernel(x.size, fn), out_idx=[-1], target="cpu")
    llvm = kernel.get_kernel_source("llvm")
    assert "expf" not in llvm and "llvm.exp" not in llvm  # no libm call left
    got = kernel(x)
    with np.errstate(over="ignore", under="ignore"):
        want = exact(x.astype(np.float64))
        want32 = want.astype(np.float32)
    nan = np.isnan(want32)
    assert np.array_equal(np.isnan(got), nan)
    edge = ~nan & ((want32 == 0) | np.isinf(want32))  # underflow to 0, overflow to inf: exact
    np.testing.assert_array_equal(got[edge], want32[edge])
    rest = ~nan & ~edge
    err = ulp_error(got[rest], want[rest])
    assert err.max() <= limit, (float(err.max()), float(x[rest][err.argmax()]))


def test_nested_exp_calls_are_all_rewritten():
    kernel = tilelang.compile(unary_kernel(2048, lambda v: T.exp(T.exp(v) - 2.0)), out_idx=[-1], target="cpu")
    assert "expf" not in kernel.get_kernel_source("llvm")
    x = np.linspace(-3, 3, 2048, dtype=np.float32)
    # an ulp of the inner exp (up to e**3) grows by the outer one's condition number (up to 20)
    np.testing.assert_allclose(kernel(x), np.exp(np.exp(x.astype(np.float64)) - 2), rtol=4e-6)


def test_fast_tanh_matches_numpy_to_2_ulp(inputs):
    rng = np.random.default_rng(11)
    near = rng.uniform(0.55, 0.7, 20_000).astype(np.float32)  # both sides of the series/exp switch
    x = np.concatenate([inputs, near, -near, np.linspace(-12, 12, 100_001, dtype=np.float32)])
    kernel = tilelang.compile(unary_kernel(x.size, T.tanh), out_idx=[-1], target="cpu")
    assert "tanhf" not in kernel.get_kernel_source("llvm")  # no libm call left
    got = kernel(x)
    want = np.tanh(x.astype(np.float64))
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all()
    np.testing.assert_array_equal(got[np.isinf(x)], np.sign(x[np.isinf(x)]))
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))  # tanh(-0) = -0
    finite = ~nan & (x != 0)
    err = ulp_error(got[finite], want[finite])
    assert err.max() <= 2.0, (float(err.max()), float(x[finite][err.argmax()]))
