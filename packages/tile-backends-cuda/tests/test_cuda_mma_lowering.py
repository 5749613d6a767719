"""The mma.sync lowering of T.gemm, before code generation (no nvcc needed).

A hand-built kernel (128 threads, shared A/B, fragment C) goes through
``infer_layout`` and ``lower_tile_ops`` for a CUDA sm_80 target; the emitted
``tile_*`` calls are counted against what the warp partition implies, and after
``lower_fragments`` every accumulator pointer must be a constant register index
in mma order (tile t of the warp at local 4t).
"""

from __future__ import annotations

from typing import Any

import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

import tile.backends.cuda._src.gemm  # noqa: F401  (registers the rule)
from tile.ir.backend import Capabilities
from tile.ir.errors import UnsupportedOnTargetError
from tile.ir.ops import Gemm
from tile.ir.ops.region import Region
from tile.ir.target import Target
from tile.ir.transform import CompileContext, infer_layout, lower_tile_ops

SM80 = CompileContext(
    Target("cuda", "sm_80"),
    Capabilities(
        warp_size=32, max_threads=1024, shared_bytes=163 * 1024,
        dtypes=frozenset({"float16", "bfloat16", "float32", "int8", "int32"}),
        vector_bits=128, has_device=False, thread_binding=True, async_copy=True,
        mma_shapes=((16, 8, 16), (16, 8, 32), (16, 8, 8)),
    ),
)  # fmt: skip


def _kernel(
    m: int, n: int, k: int, dtype: str = "float16", acc: str = "float32",
    trans_a: bool = False, trans_b: bool = False, threads: int = 128, a_scope: str = "shared",
) -> Any:  # fmt: skip
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    A = tirx.decl_buffer(a_shape, dtype, name="A_s", scope=a_scope)
    B = tirx.decl_buffer(b_shape, dtype, name="B_s", scope="shared")
    C = tirx.decl_buffer((m, n), acc, name="C_l", scope="local.fragment")
    gemm = Gemm(Region.full(A), Region.full(B), Region.full(C), trans_a, trans_b, True)
    tx = tirx.Var("tx", "int32")
    body = tirx.AttrStmt(
        tirx.IterVar(ir.Range(0, threads), tx, 1, "threadIdx.x"), "thread_extent", threads,
        tirx.Evaluate(gemm.encode()),
    )  # fmt: skip
    func = tirx.PrimFunc(
        [], tirx.SeqStmt([tirx.AllocBuffer(A), tirx.AllocBuffer(B), tirx.AllocBuffer(C), body])
    )
    return tvm.IRModule({"k": func.with_attr("global_symbol", "k")})


def _calls(mod: Any) -> list[Any]:
    found: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node.op, ir.Op) and str(node.op.name) == "tirx.call_extern":
            found.append(node)

    tvm_ffi.structural_walk(mod["k"].body, (ir.Call, visit))
    return found


def _names(calls: list[Any]) -> list[str]:
    return [str(c.args[0].value) for c in calls]


def _lowered(**kw: Any) -> Any:
    return lower_tile_ops(infer_layout(_kernel(**kw), SM80), SM80)


def test_paper_gemm_tile_emits_ldmatrix_and_mma_per_warp() -> None:
    # 128x128x32 over 4 warps: 2x2 warps of 64x64 -> 4 m16 tiles x 8 n8 tiles, 2 k-steps
    # (the k-step loop is one unrolled TIR loop, so calls appear once per step body).
    names = _names(_calls(_lowered(m=128, n=128, k=32)))
    assert names.count("tile_mma_m16n8k16_f16_f32") == 4 * 8
    assert names.count("tile_ldmatrix_x4") == 4  # A, K-contiguous
    assert names.count("tile_ldmatrix_x4_trans") == 4  # B as [K][N]: two n8 tiles per load


@pytest.mark.parametrize(
    ("dtype", "acc", "trans_b", "mma", "ldm_b"),
    [
        ("bfloat16", "float32", True, "tile_mma_m16n8k16_bf16_f32", "tile_ldmatrix_x4"),
        ("int8", "int32", True, "tile_mma_m16n8k32_s8_s32", "tile_ldmatrix_x4"),
        ("float32", "float32", True, "tile_mma_m16n8k8_tf32_f32", "tile_ldmatrix_x4"),
        ("float16", "float16", False, "tile_mma_m16n8k16_f16_f16", "tile_ldmatrix_x4_trans"),
    ],
)
def test_dtypes_pick_their_instruction(dtype: str, acc: str, trans_b: bool, mma: str, ldm_b: str) -> None:
    names = _names(_calls(_lowered(m=64, n=64, k=64, dtype=dtype, acc=acc, trans_b=trans_b)))
    assert mma in names and ldm_b in names
    assert not any(n.startswith("tile_mma") and n != mma for n in names)


def test_transposed_int8_operand_falls_back_to_element_loads() -> None:
    # ldmatrix .trans moves 16-bit halves, so an MN-contiguous int8 B is gathered element-wise.
    names = _names(_calls(_lowered(m=64, n=64, k=64, dtype="int8", acc="int32", trans_b=False)))
    assert "tile_ldmatrix_x4_trans" not in names and "tile_mma_m16n8k32_s8_s32" in names


def test_unsupported_accumulator_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedOnTargetError, match=r"no mma\.sync"):
        _lowered(m=64, n=64, k=32, dtype="bfloat16", acc="float16")


def test_accumulator_pointers_become_register_indices() -> None:
    lower_fragments = pytest.importorskip("tile.ir.transform.lower_fragments").lower_fragments
    mod = lower_fragments(_lowered(m=128, n=128, k=32), SM80)
    starts = []
    for call in _calls(mod):
        if str(call.args[0].value).startswith("tile_mma"):
            load = call.args[1].args[0]
            assert len(load.indices) == 1 and isinstance(load.indices[0], tirx.IntImm), load
            starts.append(int(load.indices[0].value))
    assert sorted(starts) == [4 * t for t in range(32)]


def test_register_a_operand_is_read_in_place() -> None:
    # rs gemm (FlashAttention's P @ V): A is a fragment, only B is loaded with ldmatrix.
    calls = _calls(_lowered(m=64, n=64, k=64, a_scope="local.fragment"))
    names = _names(calls)
    assert names.count("tile_ldmatrix_x4") == 0 and names.count("tile_ldmatrix_x4_trans") == 2
    a_args = {
        str(c.args[2].args[0].source.name) for c in calls if str(c.args[0].value).startswith("tile_mma")
    }
    assert a_args == {"A_s"}
    lower_fragments = pytest.importorskip("tile.ir.transform.lower_fragments").lower_fragments
    mod = lower_fragments(_lowered(m=64, n=64, k=64, a_scope="local.fragment"), SM80)
    a_starts = set()
    for call in _calls(mod):
        if str(call.args[0].value).startswith("tile_mma"):
            (index,) = call.args[2].args[0].indices
            a_starts.add(str(index))
    # 2x2 warps -> 32x32 per warp: 2 m16 tiles x 4 k-steps of 8 registers each.
    assert len(a_starts) == 2, a_starts
