"""``T.float4_e2m1_unpacked``: one FP4 E2M1 code per byte, checked against the OCP
Microscaling (MX) spec v1.0's E2M1 table, written out here by hand."""

from __future__ import annotations

import numpy as np

import tile.lang as tilelang
import tile.lang.language as T

# OCP MX v1.0, section 5.3.3 (FP4 E2M1): S EE M, exponent bias 1, no Inf/NaN.
SPEC_E2M1 = {
    0b0000: 0.0, 0b0001: 0.5, 0b0010: 1.0, 0b0011: 1.5,
    0b0100: 2.0, 0b0101: 3.0, 0b0110: 4.0, 0b0111: 6.0,
    0b1000: -0.0, 0b1001: -0.5, 0b1010: -1.0, 0b1011: -1.5,
    0b1100: -2.0, 0b1101: -3.0, 0b1110: -4.0, 0b1111: -6.0,
}  # fmt: skip


def _from_fields(code: int) -> float:
    """The value by the spec's formula: (-1)^S * 2^(E-1) * (1 + M/2), subnormal (-1)^S * M/2."""
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    magnitude = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
    return -magnitude if s else magnitude


def test_value_table_is_the_spec_table():
    dt = T.float4_e2m1_unpacked
    assert dt.bits == 8 and dt.lanes == 1 and dt == "uint8"  # one code per byte
    assert dt.is_float4_e2m1_unpacked() and dt.is_float4() and not dt.is_float4_e2m1fn()
    assert dt != T.float4_e2m1fn
    for code, value in SPEC_E2M1.items():
        assert dt.values[code] == value == _from_fields(code)
        assert dt.decode(code) == value


@T.prim_func
def _round_trip(
    X: T.Tensor((64,), "float32"),
    Codes: T.Tensor((64,), T.float4_e2m1_unpacked),
    Back: T.Tensor((64,), "float32"),
):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((64,), T.float4_e2m1_unpacked)
        for i in T.Parallel(64):
            S[i] = T.float4_e2m1_unpacked(X[i])
        for i in T.Parallel(64):
            Codes[i] = S[i]
            Back[i] = T.float4_e2m1_unpacked.decode(S[i])


def _nearest_even(x: float) -> int:
    """numpy reference: the spec value nearest to x, a tie to the even code, saturating."""
    mags = np.array([SPEC_E2M1[c] for c in range(8)])
    a = min(abs(x), 6.0)
    dist = np.abs(mags - a)
    best = np.flatnonzero(dist == dist.min())
    code = int(best[0] if len(best) == 1 else best[best % 2 == 0][0])
    return code | (8 if x < 0 else 0)


def test_encode_and_decode_in_a_kernel():
    spec_values = list(SPEC_E2M1.values())
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.75, -3.5]
    others = [0.1, 0.3, 1.1, 2.9, 4.9, 5.1, 7.0, 100.0, -100.0, -2.2]
    rest = np.random.default_rng(4).uniform(-8, 8, 64 - 16 - len(ties) - len(others)).tolist()
    x = np.array(spec_values + ties + others + rest, "float32")
    kernel = tilelang.compile(_round_trip, out_idx=[1, 2], target="cpu")
    codes, back = kernel(x)
    want = np.array([_nearest_even(float(v)) for v in x], "uint8")
    assert want[8] == 0  # the spec's -0.0 (code 8) encodes as +0: it compares equal to 0
    np.testing.assert_array_equal(codes, want)
    np.testing.assert_array_equal(back, [SPEC_E2M1[int(c)] for c in want])
    assert [T.float4_e2m1_unpacked(float(v)).value for v in ties] == [0, 2, 2, 4, 4, 6, 6, 10, 14]
