"""tile.ops.dequant_gemm: FP4 (E2M1) and INT4 weight-only GEMM against numpy."""

import numpy as np
import pytest

from tile.ops.dequant_gemm import dequant_matmul, dequantize, pack_4bit


def test_fp4_e2m1_decodes_every_code():
    # One weight row per code against a one-hot activation reads the decoded value back.
    codes = np.repeat(np.arange(16, dtype="uint8")[:, None], 2, axis=1)
    a = np.array([[1, 0]], "float32")
    out = dequant_matmul(a, pack_4bit(codes), fmt="fp4", target="cpu")
    expected = [0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6]
    np.testing.assert_array_equal(out[0], np.array(expected, "float32"))


def test_int4_decodes_twos_complement_and_scales():
    codes = np.repeat(np.arange(16, dtype="uint8")[:, None], 32, axis=1)
    scale = np.full((16, 1), 0.5, "float32")
    a = np.zeros((1, 32), "float32")
    a[0, 31] = 1  # an odd column: the high nibble
    out = dequant_matmul(a, pack_4bit(codes), scale, fmt="int4", target="cpu")
    np.testing.assert_array_equal(out[0], 0.5 * np.array([*range(8), *range(-8, 0)], "float32"))


@pytest.mark.parametrize(
    "fmt,mnk,dtype",
    [("fp4", (64, 64, 128), "float32"), ("int4", (37, 45, 96), "float16")],  # whole tiles; tails
)
def test_dequant_matmul_matches_numpy(fmt, mnk, dtype):
    m, n, k = mnk
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    packed = pack_4bit(rng.integers(0, 16, size=(n, k), dtype="uint8"))
    scale = (rng.random((n, k // 32)) + 0.5).astype(dtype) if fmt == "int4" else None
    out = dequant_matmul(a, packed, scale, fmt=fmt, target="cpu")
    ref = a.astype("float64") @ dequantize(packed, fmt, scale).T.astype("float64")
    tol = 1e-4 if dtype == "float32" else 2e-3
    np.testing.assert_allclose(out.astype("float64"), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_dequant_matmul_checks_operands():
    a = np.zeros((4, 64), "float32")
    with pytest.raises(ValueError, match="packed"):
        dequant_matmul(a, np.zeros((8, 64), "uint8"))
    with pytest.raises(ValueError, match="scale"):
        dequant_matmul(a, np.zeros((8, 32), "uint8"), fmt="int4")
    with pytest.raises(ValueError, match=r"0\.\.15"):
        pack_4bit(np.full((2, 2), 16))
