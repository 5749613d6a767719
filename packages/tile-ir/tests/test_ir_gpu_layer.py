"""tile.ir.gpu without a vendor: launch recipes, host argument checks, atomics, SIMT rules, the ring.

The vendor backends (CUDA, ROCm) test these pieces through whole kernels; here each is
checked on its own against hand-computed values, so a vendor-neutral regression shows
up in tile-ir's suite first.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.backend import Capabilities
from tile.ir.errors import BackendError
from tile.ir.gpu import (
    LOWER_GPU_ATOMICS,
    KernelParam,
    LaunchRecipe,
    RingSync,
    evaluate,
    python_expr,
    register_simt_lowerings,
)
from tile.ir.gpu.artifact import launch_meta, params_from_meta, read_launch_meta, write_cache_entry
from tile.ir.gpu.emulation import bind_host_arguments
from tile.ir.ops import ATOMIC_UPDATE, Atomic, Copy, Reduce, find_lowering
from tile.ir.target import Target
from tile.ir.transform import CompileContext, lower_tile_ops

CAPS = Capabilities(32, 1024, 48 * 1024, frozenset({"float32"}), 128, True, thread_binding=True)


class LaunchFailure(Exception):
    pass


def fail(message: str, hint: str) -> Exception:
    return LaunchFailure(f"{message} | {hint}")


@pytest.mark.parametrize("m", [1, 127, 128, 1000])
def test_launch_dims_written_as_python_evaluate_to_the_tir_value(m: int) -> None:
    M = tirx.Var("M", "int32")
    grid = tirx.floordiv(M + 127, 128) * 2 + tirx.floormod(M, 3)
    assert evaluate(python_expr(grid), {"M": m}) == (m + 127) // 128 * 2 + m % 3
    assert evaluate(python_expr(tirx.min(M, 64)), {"M": m}) == min(m, 64)


def test_a_launch_dim_no_argument_gives_is_the_launchers_error() -> None:
    with pytest.raises(LaunchFailure, match="the value of N, which no argument gives"):
        evaluate("(N // 4)", {"M": 3}, fail)
    with pytest.raises(BackendError, match="no argument gives"):
        evaluate("N", {})


def test_launch_recipe_round_trips_through_json() -> None:
    recipe = LaunchRecipe(
        "k",
        (KernelParam("tensor", "X", "float16"), KernelParam("tensormap", "X", "float16", {"box": 64})),
        ("((M + 63) // 64)", "1", "1"),
        ("128", "1", "1"),
        "4096",
    )
    assert LaunchRecipe.from_json(recipe.to_json()) == recipe
    broken = dict(recipe.to_json(), grid=["1", "1"])
    with pytest.raises(BackendError, match="three grid and block dims"):
        LaunchRecipe.from_json(broken)


def test_host_arguments_bind_symbolic_dims_and_name_each_mismatch() -> None:
    params = [("A", "float32", ("M", 8)), ("B", "float32", ("M",)), ("n", "int32", None)]
    a, b = np.zeros((5, 8), np.float32), np.zeros(5, np.float32)
    names, addresses = bind_host_arguments(params, [a, b, 3], fail)
    assert names == {"M": 5, "n": 3}
    assert addresses == {"A": a.ctypes.data, "B": b.ctypes.data}
    with pytest.raises(LaunchFailure, match=r"argument B has shape \[4\], expected \['M'\]"):
        bind_host_arguments(params, [a, np.zeros(4, np.float32), 3], fail)
    with pytest.raises(LaunchFailure, match="dtype float64, expected float32"):
        bind_host_arguments(params, [a, b.astype(np.float64), 3], fail)
    with pytest.raises(LaunchFailure, match="not row-major contiguous"):
        bind_host_arguments(params, [np.zeros((8, 5), np.float32).T, b, 3], fail)
    with pytest.raises(LaunchFailure, match="expected 3 arguments, got 2"):
        bind_host_arguments(params, [a, b], fail)


def _atomic_kernel(scope: str) -> tvm.IRModule:
    """One thread adds 1.0 to element 0 of a buffer in ``scope``."""
    out = tirx.decl_buffer((4,), "float32", name="Out")
    dst = tirx.decl_buffer((4,), "float32", name="T", scope=scope) if scope != "global" else out
    body: list[tirx.Stmt] = [] if scope == "global" else [tirx.AllocBuffer(dst)]
    body.append(tirx.Evaluate(Atomic.build("add", tirx.BufferLoad(dst, [0]), 1.0).encode()))
    if scope != "global":
        body.append(tirx.BufferStore(out, tirx.BufferLoad(dst, [0]), [0]))
    stmt = body[0] if len(body) == 1 else tirx.SeqStmt(body)
    return tvm.IRModule({"k": tirx.PrimFunc([out], stmt).with_attr("global_symbol", "k")})


@pytest.mark.parametrize("scope,calls", [("global", 1), ("shared", 1), ("local", 0)])
def test_lower_gpu_atomics_calls_the_header_for_memory_others_see(scope: str, calls: int) -> None:
    ctx = CompileContext(Target("cpu"), CAPS)
    lowered = lower_tile_ops(_atomic_kernel(scope), ctx)
    after = LOWER_GPU_ATOMICS(lowered, ctx)
    markers: list[tirx.AttrStmt] = []
    found: list[str] = []

    def on_call(call: ir.Call) -> None:
        if str(call.op.name) == "tirx.call_extern":
            found.append(str(call.args[0].value))

    tvm_ffi.structural_walk(after["k"].body, (tirx.AttrStmt, markers.append))
    tvm_ffi.structural_walk(after["k"].body, (ir.Call, on_call))
    assert not [m for m in markers if str(m.attr_key) == ATOMIC_UPDATE]
    assert found == ["tile::atomic_add"] * calls


def test_registered_simt_rules_lower_copy_and_reduce_for_a_new_kind() -> None:
    register_simt_lowerings("gpu_layer_test")
    target = Target("gpu_layer_test")
    for op in (Copy, Reduce):
        assert find_lowering(op, target) is not None
        assert find_lowering(op, Target("another_kind")) is not find_lowering(op, target)


def test_a_ring_sync_must_say_how_it_commits_and_waits() -> None:
    sync = RingSync()
    assert sync.after_wait() == [] and sync.accepts([])
    with pytest.raises(NotImplementedError, match="commits"):
        sync.commit()
    with pytest.raises(NotImplementedError, match="waits"):
        sync.wait(0, None, 1)


def test_a_cache_entry_round_trips_and_refuses_another_arch(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Stats:
        registers: int

    recipe = LaunchRecipe("k", (KernelParam("scalar", "n", "int32"),), ("n", "1", "1"), ("32", "1", "1"), "0")
    params = [("X", "float16", ("n", 4)), ("n", "int32", None)]
    meta = launch_meta("gfx90a", recipe, params, Stats(40))
    write_cache_entry(tmp_path, {"kernel.co": b"\x7fELF", "kernel.hip": "// source"}, meta)
    assert (tmp_path / "kernel.co").read_bytes() == b"\x7fELF"
    back = read_launch_meta(tmp_path, "gfx90a", "code object")
    assert LaunchRecipe.from_json(back["recipe"]) == recipe
    assert params_from_meta(back) == params and back["stats"] == {"registers": 40}
    with pytest.raises(BackendError, match="code object was built for gfx90a, this target needs gfx942"):
        read_launch_meta(tmp_path, "gfx942", "code object")


def test_every_gpu_pipeline_starts_with_the_planning_passes() -> None:
    from tile.ir.gpu import PLANNING_PASSES
    from tile.ir.transform import check_pipeline
    from tile.ir.transform.properties import ENTRY_PROPERTIES

    assert [p.name for p in PLANNING_PASSES] == [
        "check_resources_unplanned",
        "normalize",
        "infer_layout",
        "plan_pipeline",
        "plan_storage",
        "check_planned_shared",
    ]
    check_pipeline(PLANNING_PASSES, ENTRY_PROPERTIES)  # each gets what it needs, in this order
