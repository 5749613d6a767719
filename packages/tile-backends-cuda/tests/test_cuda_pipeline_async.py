"""``T.Pipelined`` on sm_80: cp.async rings (``_src/sm80_mark_pipeline_statements.py``,
``_src/sm80_pipeline_async_copies.py``, ``_src/sm80_lower_async_copies.py``).

* Schedule check (no nvcc): the ring the passes build for the paper GEMM is run step
  by step with the reference cp.async group model (``isa_tables.CpAsyncGroups``):
  every consumer must read the buffer copy its producer wrote, only after a wait
  that covers that copy's group and a barrier, and no copy may overwrite a buffer
  copy before a barrier separates it from the last reader.
* Compile checks (nvcc + nvdisasm): the paper GEMM's SASS has LDGSTS with its
  commit (LDGDEPBAR) and wait (DEPBAR) next to HMMA/LDSM and no spills; a ragged
  GEMM's tail tiles use the zero-fill form.
* GPU twins compare against torch.matmul.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tvm
import tvm_ffi
from _cuda_gpu import check_fp16_gemm_on_gpu
from _cuda_sass import HAVE_TOOLS, SKIP_REASON
from tvm import ir, tirx

import tile.backends.cuda._src.gemm  # noqa: F401  (the mma rule, until the backend imports it)
from tile.ir.gpu.async_ring import ASYNC_COPY
from tile.ir.target import Target
from tile.ir.transform import CompileContext
from tile.testsupport import isa_tables as isa

pytest.importorskip("tile.backends.cuda._src.backend", reason="no CUDA backend build here yet")


def _backend() -> Any:
    from tile.backends.cuda._src import backend

    return backend


@pytest.fixture
def async_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A private kernel cache (the backend's pipeline lists the cp.async passes)."""
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    yield


def _gemm(m: int, n: int, k: int, stages: int = 3) -> Any:
    from tile.ops.gemm import matmul_kernel

    return matmul_kernel(m, n, k, block_M=128, block_N=128, block_K=32, num_stages=stages, threads=128)


def _lower_until(func: Any, last: str, arch: str = "sm_80") -> Any:
    backend = _backend()
    # the cp.async ring; on sm_90a the TMA + warp-specialized pipeline is off
    target = Target.parse({"kind": "cuda", "arch": arch, "warp_specialize": "0"})
    ctx = CompileContext(target=target, capabilities=backend.capabilities(target))
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    for step in backend.pipeline(target):
        mod = step(mod, ctx)
        if step.name == last:
            return mod["main"]
    raise AssertionError(f"no pass named {last}")


# --------------------------------------------------------------------------- schedule emulation
def _ring_loop(func: Any) -> Any:
    found: list[Any] = []
    tvm_ffi.structural_walk(
        func.body,
        (tirx.For, lambda loop: found.append(loop) if loop.loop_var.name.endswith("_step") else None),
    )
    assert len(found) == 1, "one pipelined loop becomes one ring loop"
    return found[0]


def _value(expr: Any, env: dict[str, int]) -> int:
    """``expr`` with named vars (and scalar buffers, e.g. a trip count) bound, others 0, folded."""

    def var(v: Any) -> Any:
        return v if tirx.is_buffer_var(v) else tirx.const(env.get(str(v.name), 0), v.ty)

    def scalar(load: Any) -> Any:
        name = str(load.source.name)
        return tirx.const(env[name], "int32") if name in env else load

    def invariant(call: Any) -> Any:  # the ring marks its step guards thread-invariant
        is_mark = isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.tvm_thread_invariant"
        return call.args[0] if is_mark else call

    bound = tvm_ffi.structural_map(expr, [(ir.Var, var), (ir.TensorLoad, scalar), (ir.Call, invariant)])
    folded = tvm.sym.Analyzer().simplify(bound)
    assert isinstance(folded, tirx.IntImm), expr
    return int(folded.value)


def _touches(stmt: Any, names: set[str], env: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(writes, reads): versioned buffer -> the copy index the statement uses."""
    writes: dict[str, int] = {}
    reads: dict[str, int] = {}

    def on_store(node: Any) -> None:
        if str(node.buffer.name) in names:
            writes[str(node.buffer.name)] = _value(node.indices[0], env)

    def on_load(node: Any) -> None:
        if str(node.source.name) in names:
            reads[str(node.source.name)] = _value(node.indices[0], env)

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.tvm_access_ptr":
            buffer = call.args[1].args[0]
            if str(buffer.name) in names:
                per_copy = 1
                for dim in list(buffer.shape)[1:]:
                    per_copy *= int(dim)
                reads[str(buffer.name)] = _value(call.args[2], env) // per_copy

    tvm_ffi.structural_walk(
        stmt, [(tirx.BufferStore, on_store), (ir.TensorLoad, on_load), (ir.Call, on_call)]
    )
    return writes, reads


def _run_ring(
    func: Any,
    stages: list[int],
    n: int,
    names: dict[str, int] | None = None,
    versioned: set[str] | None = None,
) -> list[str]:
    """Step through the ring loop; returns the violations found (empty: a sound schedule).

    ``names`` binds variables the loop's extent and guards use (e.g. a let-bound trip count).
    """
    known = dict(names or {})
    assert isa is not None
    loop = _ring_loop(func)
    step_name = str(loop.loop_var.name)
    names = versioned or {str(b.name) for b in _buffers_with_copies(func) if str(b.name).endswith("_shared")}
    groups = isa.CpAsyncGroups()
    landed: set[tuple[str, int]] = set()  # (buffer, iteration) complete for this thread
    visible: set[tuple[str, int]] = set()  # ... and for every thread (after a barrier)
    holder: dict[tuple[str, int], int] = {}  # (buffer, copy) -> iteration whose data it holds
    last_read: dict[tuple[str, int], bool] = {}  # (buffer, copy) read since the last barrier
    problems: list[str] = []
    producer_stage = 0

    def run(stmt: Any, step: int, in_copy: bool) -> None:
        env = {**known, step_name: step}
        if isinstance(stmt, tirx.SeqStmt):
            for child in stmt.seq:
                run(child, step, in_copy)
            return
        if isinstance(stmt, tirx.IfThenElse):
            if _value(stmt.condition, env):
                run(stmt.then_case, step, in_copy)
            elif stmt.else_case is not None:
                run(stmt.else_case, step, in_copy)
            return
        if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, ir.Call):
            call = stmt.value
            name = str(call.args[0].value) if str(call.op.name) == "tirx.call_extern" else str(call.op.name)
            if name == "tile_cp_async_commit":
                groups.commit_group()
            elif name.startswith("tile_cp_async_wait<"):
                landed.update(groups.wait_group(int(name[len("tile_cp_async_wait<") : -1])))
            elif name == "tirx.tvm_storage_sync":
                visible.update(landed)
                last_read.clear()
            return
        if isinstance(stmt, tirx.AttrStmt) and str(stmt.attr_key) == ASYNC_COPY:
            run(stmt.body, step, True)
            return
        writes, reads = _touches(stmt, names, env)
        for buffer, copy in writes.items():
            iteration = step - producer_stage
            if last_read.get((buffer, copy)):
                problems.append(
                    f"step {step}: {buffer} copy {copy} overwritten while another warp may read it"
                )
            holder[(buffer, copy)] = iteration
            if in_copy:
                groups.issue((buffer, iteration))
            else:
                landed.add((buffer, iteration))
        for buffer, copy in reads.items():
            consumer = [s for s in stages if s > 0]
            iteration = step - max(consumer)
            if holder.get((buffer, copy)) != iteration:
                problems.append(
                    f"step {step}: {buffer} copy {copy} holds {holder.get((buffer, copy))}, not {iteration}"
                )
            if (buffer, iteration) not in visible:
                problems.append(f"step {step}: {buffer} of iteration {iteration} read before it is visible")
            last_read[(buffer, copy)] = True

    extent = _value(loop.extent, known)
    assert extent == n + max(stages), "the ring runs n + (last stage) steps"
    for step in range(extent):
        run(loop.body, step, False)
    return problems


def _buffers_with_copies(func: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(
        func.body,
        (
            tirx.AllocBuffer,
            lambda a: found.append(a.buffer) if str(a.buffer.scope()).startswith("shared") else None,
        ),
    )
    return found


def test_one_iteration_pipelined_loop_gets_no_ring() -> None:
    # k == block_K: nothing to overlap, and the ring's one-value guards made TVM's buffer
    # compaction size shared buffers by the step variable outside its loop (codegen failed)
    func = _lower_until(_gemm(256, 256, 32, 3), "pipeline_async_copies")
    shapes = {str(b.name): len(b.shape) for b in _buffers_with_copies(func)}
    assert shapes == {"A_shared": 2, "B_shared": 2}, "no leading copies dim"
    assert "tile_cp_async_commit" not in func.script()


@pytest.mark.parametrize(("k", "stages"), [(1024, 3), (64, 3), (256, 2), (256, 4)])
def test_ring_schedule_is_sound_under_the_cp_async_group_model(k: int, stages: int) -> None:
    func = _lower_until(_gemm(256, 256, k, stages), "pipeline_async_copies")
    copies = {str(b.name): int(b.shape[0]) for b in _buffers_with_copies(func)}
    # a ring is never deeper than its loop runs: 2 steps (k = 64) over 3 stages get 2 copies
    depth = min(stages, k // 32)
    assert copies == {"A_shared": depth, "B_shared": depth}, "a buffer has min(stages, steps) copies"
    plan = [0, 0, depth - 1]  # plan_pipeline: the two copies first, the gemm num_stages - 1 steps behind
    assert _run_ring(func, plan, k // 32) == []


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_flash_attention_ring_is_sound(arch: str) -> None:
    """K and V stream in through the ring while S = Q K^T and O += P V run one step behind."""
    from tile.ops.attention import flash_attention_kernel

    kernel = flash_attention_kernel(
        1, 4, 1024, 128, False, block_M=128, block_N=128, num_stages=2, threads=256
    )
    func = _lower_until(kernel, "pipeline_async_copies", arch)
    copies = {
        str(b.name): len(b.shape) for b in _buffers_with_copies(func) if str(b.name).endswith("_shared")
    }
    assert copies == {"Q_shared": 2, "K_shared": 3, "V_shared": 3}, "K and V get a leading copies dim"
    # plan_pipeline: both copies in stage 0, the twelve other statements in stage 1
    assert _run_ring(func, [0, 1], 8, {"loop_range": 8}, {"K_shared", "V_shared"}) == []


def test_ring_waits_for_the_oldest_group_only() -> None:
    func = _lower_until(_gemm(256, 256, 1024, 3), "pipeline_async_copies")
    text = func.script()
    assert text.count('"tile_cp_async_wait<1>"') == 1, "a 3-stage ring keeps one group in flight"
    assert text.count('"tile_cp_async_commit"') == 1
    assert text.count('"tile_cp_async_wait<0>"') == 1, "the ring drains after the loop"


def test_targets_without_async_copies_keep_the_serial_loop() -> None:
    func = _gemm(256, 256, 256, 3)
    backend = _backend()
    target = Target(kind="cuda", arch="sm_80")
    caps = backend.capabilities(target)
    import dataclasses

    ctx = CompileContext(target=target, capabilities=dataclasses.replace(caps, async_copy=False))
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    for step in backend.pipeline(target):
        mod = step(mod, ctx)
    text = mod["main"].script()
    assert "tile_cp_async" not in text and "_step" not in text


# --------------------------------------------------------------------------- compile checks
needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)


def _compile(func: Any, arch: str = "sm_80") -> Any:
    import tile.lang as tilelang

    return tilelang.compile(func, target={"kind": "cuda", "arch": arch})


def _count(sass: str, opcode: str) -> int:
    return len(re.findall(r"\b" + re.escape(opcode) + r"\b", sass))


@needs_tools
@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_paper_gemm_streams_tiles_with_ldgsts(async_pipeline: None, arch: str) -> None:
    kernel = _compile(_gemm(1024, 1024, 1024, 3), arch)
    binary = kernel.artifact.payload
    assert binary.stats.spill_stores == 0 and binary.stats.spill_loads == 0, binary.stats
    sass = binary.sass()
    # 128x32 + 32x128 halves per stage over 128 threads: 4 + 4 16-byte copies per thread.
    assert _count(sass, "LDGSTS.E.BYPASS.128") == 8
    assert _count(sass, "LDGDEPBAR") >= 1 and _count(sass, "DEPBAR.LE") >= 1
    assert _count(sass, "HMMA.16816.F32") == 64 and _count(sass, "LDSM.16.M88.4") > 0
    assert not re.search(r"\bLDG\.E\.128\b", sass), "no synchronous global loads are left in the main loop"
    source = binary.source
    assert "tile_cp_async_16(" in source and "tile_cp_async_wait<1>()" in source


@needs_tools
def test_ragged_gemm_tail_tiles_use_zero_fill(async_pipeline: None) -> None:
    kernel = _compile(_gemm(1000, 1000, 1000, 3))
    binary = kernel.artifact.payload
    assert binary.stats.spill_stores == 0, binary.stats
    assert "tile_cp_async_zfill_16(" in binary.source
    sass = binary.sass()
    assert not re.search(r"\bLDG\.E\.128\b", sass), "tail tiles are copied by zero-fill cp.async too"
    assert _count(sass, "LDGSTS.E.BYPASS.128") >= 16  # full-tile and tail-tile copies


# --------------------------------------------------------------------------- GPU twins
@pytest.mark.gpu
@pytest.mark.parametrize(
    ("m", "n", "k", "stages"),
    [(1024, 1024, 1024, 3), (1000, 1000, 1000, 3), (256, 256, 32, 3), (512, 384, 640, 4), (256, 256, 256, 2)],
)
def test_pipelined_gemm_matches_torch_matmul(
    async_pipeline: None, m: int, n: int, k: int, stages: int
) -> None:
    check_fp16_gemm_on_gpu(_compile(_gemm(m, n, k, stages)), m, n, k)
