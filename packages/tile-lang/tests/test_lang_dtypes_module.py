"""``tile.lang.language.dtypes`` and ``tile.lang.cuda.intrinsics.sparse_layout``: the modules
TileLang's programs import element types and the 2:4 format's factors from
(examples/gemm_sp/sparse_utils.py, testing/python/language/*dtype*, carver's tests).

References: torch's own dtype objects, apache-tvm's ``DataType``, and the format's arithmetic
by hand (four metadata bits describe one group of four 16-bit or 8-bit elements, of two
32-bit ones).
"""

from __future__ import annotations

import pickle

import pytest
import torch
import tvm

import tile.lang.language as T
from tile.lang.cuda.intrinsics import sparse_layout
from tile.lang.errors import TileTypeError
from tile.lang.language import dtypes


def test_every_type_name_is_the_languages_object_and_a_tvm_datatype():
    assert {"float16", "half", "float", "double", "int4", "float16x2", "float8_e4m3fn", "bool"} <= set(
        dtypes._all_dtypes
    )
    for name in dtypes._all_dtypes:
        value = getattr(dtypes, name)
        assert value is getattr(T, name)
        assert isinstance(value, tvm.DataType) and isinstance(value, str), name
        assert pickle.loads(pickle.dumps(value)) == value  # kernel cache keys pickle them
    assert repr(T.float16) == "'float16'" and T.float.bytes == 4 and T.float16x2.bytes == 4


def test_the_torch_tables_agree_with_torch():
    for torch_dtype, name in dtypes._TORCH_DTYPE_TO_STR.items():
        assert getattr(torch, name) is torch_dtype
        assert dtypes._STR_TO_TORCH_DTYPE[name] is torch_dtype
        assert dtypes.dtype(name).as_torch() is torch_dtype
    common = (torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.float8_e4m3fn, torch.bool)
    for torch_dtype in common:
        assert dtypes.dtype(dtypes._TORCH_DTYPE_TO_STR[torch_dtype]).as_torch() is torch_dtype


def test_four_bit_types_are_stored_in_bytes_torch_has():
    assert dtypes.resolve_torch_storage_dtype(T.int4) == "int8"
    assert dtypes.resolve_torch_storage_dtype(T.float16) == "float16"
    assert T.int4.as_torch() is torch.int8
    fp4_storage = getattr(torch, "float4_e2m1fn_x2", torch.int8)
    assert T.float4_e2m1fn.as_torch() is fp4_storage and T.float4_e2m1fnx2.as_torch() is fp4_storage
    expected = "float4_e2m1fnx2" if hasattr(torch, "float4_e2m1fn_x2") else "int8"
    assert dtypes.resolve_torch_storage_dtype("float4_e2m1fn") == expected


def test_fp4_predicates():
    packed, unpacked = T.float4_e2m1fn, T.float4_e2m1_unpacked
    assert packed.bits == 4 and unpacked.bits == 8 and packed != unpacked
    assert packed.is_float4_e2m1fn() and not packed.is_float4_e2m1_unpacked() and packed.is_float4()
    assert unpacked.is_float4_e2m1_unpacked() and not unpacked.is_float4_e2m1fn() and unpacked.is_float4()
    assert T.float4_e2m1fnx2.is_float4() and not T.float16.is_float4()
    assert dtypes.is_float4("float4_e2m1fn") and dtypes.is_float4("custom[float4_e2m1_unpacked]8")
    assert dtypes.is_float4_e2m1_unpacked(unpacked) and not dtypes.is_float4(T.float16)
    assert dtypes.is_f8f6f4_family(T.float8_e4m3fn) and dtypes.is_f8f6f4_family("float6_e2m3fn")
    assert not dtypes.is_f8f6f4_family(T.float16)


def test_an_unknown_type_name_is_a_typed_error():
    with pytest.raises(TileTypeError, match="'floatx' is not an element type"):
        dtypes.dtype("floatx")


def test_sparse_factors_by_hand():
    # (kept, group): two of four 8/16-bit elements, one of two float32 ones
    assert sparse_layout.GROUP_CONFIG[T.float16] == (2, 4) and sparse_layout.GROUP_CONFIG[T.float] == (1, 2)
    assert sparse_layout.GROUP_CONFIG[T.float8_e4m3] == (2, 4)  # TileLang's name for e4m3fn
    # a 16-bit metadata element holds 4 groups of 4 bits: 4 groups x 4 elements = 16 (x 2 for float32)
    assert sparse_layout.get_e_factor(T.float16, T.int16) == 16
    assert sparse_layout.get_e_factor(T.int8, T.int32) == 32
    assert sparse_layout.get_e_factor(T.float32, T.int16) == 8
    assert [sparse_layout.get_e_replicate_factor(t) for t in (T.int8, T.float16, T.float32)] == [1, 2, 2]
