"""``tile.ir.packed``: the logical shape and strides of a sub-byte tensor's packed storage,
hand-computed (two fp4/int4 codes per byte along the last dim)."""

from __future__ import annotations

from typing import Any

import pytest

from tile.ir.packed import packed_view, subbyte_bits


def test_subbyte_bits() -> None:
    assert [subbyte_bits(d) for d in ("float4_e2m1fn", "int4", "uint4")] == [4, 4, 4]
    assert [subbyte_bits(d) for d in ("int8", "float16", "float32x4", "not_a_type")] == [None] * 4


@pytest.mark.parametrize(
    ("storage", "shape", "strides", "expected"),
    [
        ("uint8", (4, 8), None, ((4, 16), None)),
        ("int8", (4, 8), (8, 1), ((4, 16), (16, 1))),
        ("uint8", (4, 8), (16, 1), ((4, 16), (32, 1))),  # every other row of an (8, 8) tensor
        ("uint8", (2, 3, 5), (30, 10, 1), ((2, 3, 10), (60, 20, 1))),
        ("float4_e2m1fn_x2", (1, 4), (4, 1), ((1, 8), (8, 1))),
    ],
)
def test_packed_view_of_storage(storage: str, shape: tuple[int, ...], strides: Any, expected: Any) -> None:
    assert packed_view("float4_e2m1fn", storage, shape, strides) == expected


def test_not_packed_storage() -> None:
    assert packed_view("float4_e2m1fn", "float32", (4, 8)) is None  # not bytes
    assert packed_view("float16", "uint8", (4, 8)) is None  # not a sub-byte parameter
    assert packed_view("float4_e2m1fn", "uint8", (4, 8), (1, 4)) is None  # bytes of a row not adjacent
    assert packed_view("float4_e2m1fn", "uint8", ()) is None
