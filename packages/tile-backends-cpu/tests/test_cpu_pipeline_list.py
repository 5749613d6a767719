"""The CPU pipeline, pinned: one list, in contract order."""

from __future__ import annotations

from tile.backends.cpu import MANIFEST
from tile.ir.target import Target
from tile.ir.transform import check_pipeline
from tile.ir.transform.properties import ENTRY_PROPERTIES

CPU = [
    "check_resources",
    "normalize",
    "read_in_place",
    "fold_k_loop",
    "infer_layout",
    "plan_pipeline",
    "plan_storage",
    "lower_tile_ops",
    "legalize_fp8",
    "drop_block_barriers",
    "fuse_fragment_loops",
    "fold_block_columns",
    "split_dynamic_tails",
    "serialize_pipelined_loops",
    "bind_parallel_loops",
    "fuse_vector_nests",
    "serialize_block_grid",
    "declare_param_alignment",
    "inline_fast_exp",
    "stack_small_locals",
    "prepack_b",
    "stream_gemm_c",
    "stream_stores",
    "round_bf16_casts",
]


def test_the_cpu_pipeline_is_pinned_and_in_contract_order() -> None:
    passes = MANIFEST.pipeline(Target(kind="cpu"))
    assert [p.name for p in passes] == CPU
    check_pipeline(passes, ENTRY_PROPERTIES)
