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
    "lower_host_atomics",
    "legalize_fp8",
    "drop_block_barriers",
    "fuse_fragment_loops",
    "fold_block_columns",
    "guard_global_accesses",
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


def test_checks_see_the_accesses_after_the_guards() -> None:
    # TILE_CHECK=1: the bounds checks come right after the guards TileLang's rule adds, so a
    # guarded access (which does nothing outside its tensor) is not reported
    names = [p.name for p in MANIFEST.pipeline(Target(kind="cpu", options=(("check", "1"),)))]
    at = names.index("lower_tile_ops")
    want = ["mark_source_lines", "lower_tile_ops", "guard_global_accesses", "check_bounds"]
    assert names[at - 1 : at + 3] == want
    assert names.count("guard_global_accesses") == 1
