"""The reference helpers themselves: the tf32 product bound against a bit-level simulation."""

from __future__ import annotations

import dataclasses

import numpy as np

from tile.conformance import reference as ref


@dataclasses.dataclass
class _Caps:
    float32_gemm: str


def _tf32(x: np.ndarray, rounding: bool) -> np.ndarray:
    """float32 -> tf32 bits (10 mantissa bits), truncated or rounded to nearest (ties away)."""
    bits = x.astype(np.float32).view(np.uint32).copy()
    if rounding:
        bits += np.uint32(0x1000)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def test_tf32_product_error_bounds_truncated_and_rounded_operands() -> None:
    bound = ref.gemm_product_error("float32", _Caps("tfloat32"))
    rng = np.random.default_rng(0)
    a = (rng.random(100_000) * 4 - 2).astype(np.float32)
    b = (rng.random(100_000) * 4 - 2).astype(np.float32)
    exact = a.astype(np.float64) * b.astype(np.float64)
    for rounding in (False, True):
        got = _tf32(a, rounding).astype(np.float64) * _tf32(b, rounding).astype(np.float64)
        worst = np.max(np.abs(got - exact) / np.abs(exact))
        assert worst <= bound
    # truncation does come close to the bound: it is not loose by orders of magnitude
    truncated = _tf32(a, False).astype(np.float64) * _tf32(b, False).astype(np.float64)
    assert np.max(np.abs(truncated - exact) / np.abs(exact)) > bound / 2


def test_exact_products_elsewhere() -> None:
    assert ref.gemm_product_error("float32", _Caps("float32")) == 0.0
    assert ref.gemm_product_error("float16", _Caps("tfloat32")) == 0.0
    assert ref.gemm_product_error("float32", object()) == 0.0
