"""Mutation check: known compiler faults the conformance suite must catch, on every backend.

Each row of ``FAULTS`` is one fault: the file it patches, the exact original snippet and its
replacement, the backends whose code the snippet is on (``cpu``, ``cuda-emu-sm_80``,
``cuda-emu-sm_90a``, ``rocm-emu``: the GPU backends run their generated CUDA/HIP source on the
CPU emulator, ``TILE_DEVICE=emu``), and the conformance tests that catch it. The script
copies the git-tracked files of ``packages/`` and ``conformance/`` (working-tree contents) to
a temporary directory and runs pytest there with the copy's source folders first on
``PYTHONPATH``, so the copy's ``tile`` modules shadow the installed ones; nothing is
installed and the working tree is never modified. For each backend it first runs the
union of the catching tests unpatched (they must pass), then, for each fault and each of its
backends, patches the copy, runs only that fault's catching tests on that backend (kernel
cache off, ``TILE_CACHE=0``; the emulator's build cache is keyed by the generated source, so
it is shared) and restores the file.

Every mutant must make its tests FAIL. A table is printed; the exit status is 1 if any
mutant survives, the unpatched tests fail, or a snippet no longer matches its file exactly
once (the message names the row of ``FAULTS`` to update). A backend whose tests all skip
here (no hipcc: the ROCm emulator needs it) is reported as not run, not as caught.

    python conformance/mutation/run_mutations.py              # every fault (nox -s mutation)
    python conformance/mutation/run_mutations.py --ci         # the fast subset CI runs
    python conformance/mutation/run_mutations.py --only barrier --backend cuda-emu-sm_90a
    python conformance/mutation/run_mutations.py --check      # only: do the snippets match?
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import pathlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

ROOT = pathlib.Path(__file__).resolve().parents[2]
IR = "packages/tile-ir/src/tile/ir"
LAYOUT = "packages/tile-layout/src/tile/layout"
CPU = "packages/tile-backends-cpu/src/tile/backends/cpu/_src"
CUDA = "packages/tile-backends-cuda/src/tile/backends/cuda/_src"
ROCM = "packages/tile-backends-rocm/src/tile/backends/rocm/_src"
GPU_PATHS = "conformance/tests/test_conf_gpu_paths.py"
REDUCE_1D = "conformance/tests/test_conf_reduce.py::test_full_reduction_of_a_1d_fragment"
TAIL_TILE = ("conformance/tests/test_conf_layout_contract.py"
             "::test_tail_tile_reads_nothing_past_the_dynamic_extent")

#: backend -> pytest options selecting it (and, for the GPU backends, the architecture)
BACKENDS: dict[str, tuple[str, ...]] = {
    "cpu": ("--tile-backend=cpu",),
    "cuda-emu-sm_80": ("--tile-backend=cuda", "--tile-device=emu", "--tile-arch=sm_80"),
    "cuda-emu-sm_90a": ("--tile-backend=cuda", "--tile-device=emu", "--tile-arch=sm_90a"),
    "rocm-emu": ("--tile-backend=rocm", "--tile-device=emu", "--tile-arch=gfx90a"),
}
CUDA_EMU = ("cuda-emu-sm_80", "cuda-emu-sm_90a")
GPU_EMU = (*CUDA_EMU, "rocm-emu")
EVERY = tuple(BACKENDS)
# Where a whole-block T.Pipelined gemm is an async-copy ring that only the ring's own waits and
# barriers order (sm_90a puts it on TMA; a ragged ring has plain stores too, after which TVM's
# barrier placement adds a barrier of its own)
RINGS = ("cuda-emu-sm_80", "rocm-emu")


@dataclasses.dataclass(frozen=True)
class Fault:
    """One compiler fault: ``original`` (exactly once in ``path``) becomes ``replacement``.

    ``tests`` are pytest node ids (``file::name``) or ``-k`` expressions prefixed with
    ``-k `` (applied to the files of the other ids, or to ``conformance/tests``); ``ci``: the
    backends on which the fault is part of the CI subset (``--ci``: quick tests, one or two
    faults of each kind per backend).
    """

    name: str
    path: str
    original: str
    replacement: str
    backends: tuple[str, ...]
    tests: tuple[str, ...]
    ci: tuple[str, ...] = ()


FAULTS: list[Fault] = [
    # -- generic rules (tile-ir, tile-layout): every backend lowers through them ---------------
    Fault("off-by-one in copy bounds predicate", f"{IR}/ops/loops.py",
          "        if not analyzer.can_prove(index < size):\n            conds.append(index < size)",
          "        if not analyzer.can_prove(index < size):\n            conds.append(index < size - 1)",
          EVERY, (TAIL_TILE,), ci=("cpu",)),
    Fault("wrong reduction init", f"{IR}/ops/reduce.py",
          'if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):\n        return tirx.const(0, dtype)',
          'if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):\n        return tirx.const(1, dtype)',
          EVERY, (REDUCE_1D,)),
    Fault("wrong tail split", f"{IR}/transform/split_dynamic_tails.py",
          # off by one: a tile whose last index equals the extent takes the unguarded path
          "            parts.append(at_last(cond))",
          "            parts.append(tirx.LE(at_last(cond.a), cond.b))",
          EVERY, (TAIL_TILE,)),
    Fault("cast dropped", f"{IR}/ops/loops.py",
          "    if str(value.ty) == dtype:\n        return value\n    return tirx.Cast(dtype, value)",
          "    if str(value.ty) == dtype:\n        return value\n    return value",
          ("cpu",), (f"{GPU_PATHS}::test_fragment_stored_through_shared_float16",)),
    Fault("wrong swizzle XOR", f"{LAYOUT}/swizzle.py",
          "return _tvm.floormod(_tvm.floordiv(phys_row, rows_per_xor), phases)",
          "return _tvm.floormod(phys_row, phases)",
          ("cpu",), ("conformance/tests/test_conf_layout_contract.py",)),
    Fault("wrong fragment thread map", f"{LAYOUT}/hardware/_base.py",
          "forward_fn=lambda r, c: (r * LANES_PER_ROW + c // k, c % k))",
          "forward_fn=lambda r, c: (r + 8 * (c // k), c % k))",
          ("cpu",), ("conformance/tests/test_conf_layout_contract.py",)),
    Fault("WAR dependence ignored in plan_pipeline", f"{IR}/transform/plan_pipeline.py",
          "shared = (a.writes & (b.reads | b.writes)) | (a.reads & b.writes)",
          "shared = a.writes & (b.reads | b.writes)",
          ("cpu",), ("conformance/tests/test_conf_layout_contract.py",)),
    # -- the GPU layer's async-copy ring (tile-ir): CUDA's cp.async and ROCm's LDS DMA rings ----
    Fault("ring barrier after the copy wait dropped", f"{IR}/gpu/async_ring.py",
          "    head += sync.after_wait()\n    head.append(shared_barrier())\n",
          "    head += sync.after_wait()\n",
          RINGS, (f"{GPU_PATHS}::test_ring_gemm_float16",), ci=("cuda-emu-sm_80",)),
    Fault("ring copy wait moved after the barrier", f"{IR}/gpu/async_ring.py",
          "        head += sync.wait(positive[0] - 1, step - 1, n)\n        covered = positive[0]\n"
          "    head += sync.after_wait()\n    head.append(shared_barrier())\n",
          "        covered = positive[0]\n    head += sync.after_wait()\n    head.append(shared_barrier())\n"
          "    if positive:\n        head += sync.wait(positive[0] - 1, step - 1, n)\n",
          RINGS, (f"{GPU_PATHS}::test_ring_gemm_float16",)),
    # -- CUDA sm_80 paths (sm_90a too where TMA does not apply) ---------------------------
    Fault("cp.async wait_group one group short", f"{CUDA}/sm80_pipeline_async_copies.py",
          'return [_extern(f"tile_cp_async_wait<{pending}>")]',
          'return [_extern(f"tile_cp_async_wait<{pending + 1}>")]',
          CUDA_EMU, (f"{GPU_PATHS}::test_ring_gemm_float16_ragged",)),
    Fault("ldmatrix lane map of A wrong", f"{CUDA}/gemm.py",
          "return LdmatrixPlan(4, False, lambda lane: (lane % 16, chunk * (lane // 16)))",
          "return LdmatrixPlan(4, False, lambda lane: (lane % 16, chunk * (lane % 2)))",
          ("cuda-emu-sm_80",), (f"{GPU_PATHS}::test_ring_gemm_float16",), ci=("cuda-emu-sm_80",)),
    Fault("ldmatrix .trans lane map of B wrong", f"{CUDA}/gemm.py",
          "return LdmatrixPlan(4, True, lambda lane: (lane % 16, 8 * (lane // 16)))",
          "return LdmatrixPlan(4, True, lambda lane: (lane // 2, 8 * (lane % 2)))",
          ("cuda-emu-sm_80",), (f"{GPU_PATHS}::test_ring_gemm_float16",)),
    # -- CUDA sm_90a: TMA, mbarrier ring, producer warpgroup, wgmma, stmatrix -------------
    Fault("fence.proxy.async before wgmma missing", f"{CUDA}/hopper.py",
          '    stmts.append(_call("tile_fence_proxy_async"))\n    stmts.append(_call("tile_wgmma_fence"))',
          '    stmts.append(_call("tile_wgmma_fence"))',
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_serial_gemm_float16",)),
    Fault("mbarrier phase parity flipped (consumer wait)", f"{CUDA}/sm90a_warp_specialize_loop.py",
          'consumer += [_extern("tile_mbarrier_wait", full(g), parity) for g in starts]',
          'consumer += [_extern("tile_mbarrier_wait", full(g), '
          'tirx.bitwise_xor(parity, tirx.const(1, "uint32"))) for g in starts]',
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_ring_gemm_float16",), ci=("cuda-emu-sm_90a",)),
    Fault("TMA full-barrier wait removed", f"{CUDA}/sm90a_warp_specialize_loop.py",
          'consumer += [_extern("tile_mbarrier_wait", full(g), parity) for g in starts]',
          "consumer += []",
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_ring_gemm_float16",)),
    Fault("TMA expect_tx bytes short", f"{CUDA}/sm90a_warp_specialize_loop.py",
          "tx_bytes += plan.tile_bytes",
          "tx_bytes += plan.tile_bytes // 2",
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_ring_gemm_float16",)),
    Fault("producer's empty-stage wait removed", f"{CUDA}/sm90a_warp_specialize_loop.py",
          '            _extern("tile_mbarrier_wait", empty(g), '
          'tirx.bitwise_xor(parity, tirx.const(1, "uint32"))),\n',
          "",
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_ring_gemm_float16",)),
    Fault("named barrier after mbarrier init dropped", f"{CUDA}/sm90a_split_producer_warps.py",
          '            _extern("tile_named_barrier_sync", tirx.const(0, "uint32"), '
          'tirx.const(total, "uint32")),\n',
          "",
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_ring_gemm_float16",)),
    Fault("consumer named barriers dropped", f"{CUDA}/codegen.py",
          'return tirx.call_extern("void", "tile_named_barrier_sync", one, count)',
          'return tirx.const(0, "int32")',
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_fragment_stored_through_shared_float16",)),
    Fault("wgmma descriptor swizzle mode wrong", f"{CUDA}/hopper.py",
          'tirx.const(desc.swizzle_bytes, "int32"),',
          'tirx.const({128: 64, 64: 32, 32: 128}.get(desc.swizzle_bytes, 0), "int32"),',
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_ring_gemm_float16",), ci=("cuda-emu-sm_90a",)),
    Fault("wgmma wait removed", f"{CUDA}/hopper.py",
          '    stmts.append(_call("tile_wgmma_wait<0>"))\n',
          "",
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_ring_gemm_float16",)),
    Fault("stmatrix row address lane map wrong", f"{CUDA}/stmatrix.py",
          "owner = warp_base + tirx.floormod(lane, BLOCK) * 4",
          "owner = warp_base + tirx.floormod(lane, BLOCK)",
          ("cuda-emu-sm_90a",), (f"{GPU_PATHS}::test_fragment_stored_through_shared_float16",)),
    # -- ROCm gfx90a: MFMA, LDS DMA ring ----------------------------------------------------
    Fault("MFMA A operand lane map wrong", f"{ROCM}/gemm.py",
          'coords, _ = fragment_coords(base, lane, tirx.const(v, "int32"))',
          'coords, _ = fragment_coords(base, lane if which == "B" else tirx.bitwise_xor(lane, 1), '
          'tirx.const(v, "int32"))',
          ("rocm-emu",), (f"{GPU_PATHS}::test_ring_gemm_float16",), ci=("rocm-emu",)),
    Fault("LDS DMA ring waited with vmcnt one iteration short", f"{ROCM}/lds_ring.py",
          "wait_vmem(min(groups * self.per_iteration, MAX_VMCNT))",
          "wait_vmem(min((groups + 1) * self.per_iteration, MAX_VMCNT))",
          # a 3-stage ring: a 2-stage one only ever waits for vmcnt(0). Not in the CI subset:
          # its test is a selection of its own, and rows 1-23 already give every backend a fault
          ("rocm-emu",), (f"{GPU_PATHS}::test_ring_gemm_float32_three_stages",)),
    # -- CPU backend: its own gemm lowering and micro-kernel dispatch -----------------------
    Fault("swapped transpose flag (CPU gemm)", f"{CPU}/gemm.py",
          "self.b = _View(op.b, op.transpose_b)",
          "self.b = _View(op.b, not op.transpose_b)",
          ("cpu",), (f"{GPU_PATHS}::test_ring_gemm_float16_transposed",)),
    Fault("swapped transpose flags (CPU bf16 micro-kernel call)", f"{CPU}/gemm.py",
          "_const(int(op.transpose_a)), _const(int(op.transpose_b)),",
          "_const(int(op.transpose_b)), _const(int(op.transpose_a)),",
          ("cpu",), (f"{GPU_PATHS}::test_ring_gemm_bfloat16_transposed_b",)),
]


def _rows() -> list[tuple[int, Fault]]:
    return list(enumerate(FAULTS, start=1))


def check_snippets(root: pathlib.Path = ROOT) -> list[str]:
    """One message per row whose snippet does not occur exactly once in its file (rot)."""
    problems = []
    for row, fault in _rows():
        target = root / fault.path
        count = target.read_text().count(fault.original) if target.is_file() else -1
        if count != 1:
            where = "file not found" if count < 0 else f"snippet found {count} times, not once"
            problems.append(
                f"FAULTS row {row} ({fault.name!r}): {fault.path}: {where}; the code changed, so update "
                f"row {row} of FAULTS in conformance/mutation/run_mutations.py (snippet, replacement, "
                "tests) to the fault's new form"
            )
        unknown = [b for b in (*fault.backends, *fault.ci) if b not in fault.backends or b not in BACKENDS]
        if unknown or not fault.backends or not fault.tests:
            problems.append(f"FAULTS row {row} ({fault.name!r}): needs backends from {sorted(BACKENDS)} "
                            f"and at least one test (unknown: {unknown})")
    return problems


def _copy_tree(dest: pathlib.Path) -> list[pathlib.Path]:
    """Copy the git-tracked files of packages/ and conformance/; return the copy's source roots.

    Untracked files (someone's half-written test) stay out, so the baseline is the suite as
    committed plus local edits to tracked files.
    """
    listed = subprocess.run(["git", "ls-files", "-z", "packages", "conformance"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    # Report a failing example without shrinking it: the verdict is all we need.
    (dest / "conftest.py").write_text(
        "import os\n"
        "from hypothesis import Phase, settings\n"
        "for _name in ('ci', 'emu'):\n"
        "    settings.register_profile(_name, parent=settings.get_profile(_name),\n"
        "                              phases=[Phase.explicit, Phase.reuse, Phase.generate])\n"
        "settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'ci'))\n"
    )
    # every src/ folder of a distribution (tile is a namespace package spread over them)
    return sorted(p for p in dest.rglob("src") if p.is_dir() and (p / "tile").is_dir())


def _pytest_args(tests: Sequence[str]) -> list[str]:
    files = [t for t in tests if not t.startswith("-k ")]
    keywords = [t[3:] for t in tests if t.startswith("-k ")]
    args = files or ["conformance/tests"]
    if keywords:
        args += ["-k", " or ".join(f"({k})" for k in keywords)]
    return args


@dataclasses.dataclass
class Run:
    ok: bool
    passed: int
    seconds: float
    detail: str


def _suite(copy: pathlib.Path, paths: list[pathlib.Path], backend: str, tests: Sequence[str],
           timeout: float) -> Run:
    env = dict(os.environ, TILE_CACHE="0", PYTHONPATH=os.pathsep.join(map(str, paths)),
               HYPOTHESIS_PROFILE="ci" if backend == "cpu" else "emu")
    if backend != "cpu":
        # the emulator as the strictest oracle: shared-memory races within a barrier epoch and
        # out-of-bounds accesses are reported, and threads start and wake in a shuffled order
        env.update(TILE_EMU_CHECK="1", TILE_EMU_SEED="1")
    start = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", *_pytest_args(tests), "-x", "-q", "-p", "no:cacheprovider",
           "--tile-min-examples=0", *BACKENDS[backend]]
    proc = subprocess.Popen(cmd, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session holds pytest and the compilers it started
        proc.communicate()
        return Run(False, 0, time.monotonic() - start,
                   f"timed out after {timeout:.0f} s (a hang counts as caught)")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    summary = next((ln for ln in reversed(lines) if re.search(r"\d+ (passed|failed|skipped|error)", ln)), "")
    passed = int(m.group(1)) if (m := re.search(r"(\d+) passed", summary)) else 0
    failed = next((ln for ln in lines if ln.startswith(("FAILED", "ERROR"))), "")
    if not failed and proc.returncode != 0:  # e.g. a crash of the emulator process
        failed = summary or f"pytest exited with status {proc.returncode} and no summary"
    return Run(proc.returncode == 0, passed, time.monotonic() - start, failed or summary)


def _run_all(jobs: list[tuple[int, Fault, str]], workers: int, timeout: float) -> list[Result] | None:
    """Baselines, then every job, on ``workers`` copies at once; None if a baseline fails."""
    with tempfile.TemporaryDirectory(prefix="tile-mutation-") as tmp:
        copies: queue.Queue[tuple[pathlib.Path, list[pathlib.Path]]] = queue.Queue()
        for i in range(workers):
            copy = pathlib.Path(tmp) / f"repo{i}"
            copies.put((copy, _copy_tree(copy)))

        def baseline(backend: str) -> tuple[str, int, Run]:
            tests = list(dict.fromkeys(t for _, f, b in jobs if b == backend for t in f.tests))
            copy, paths = copies.get()
            try:
                return backend, len(tests), _suite(copy, paths, backend, tests, timeout * 4)
            finally:
                copies.put((copy, paths))

        def mutant(job: tuple[int, Fault, str]) -> Result:
            row, fault, backend = job
            if not available[backend]:
                return Result(row, fault, backend, "not run", 0.0, "its tests skip here")
            copy, paths = copies.get()
            target = copy / fault.path
            source = target.read_text()
            target.write_text(source.replace(fault.original, fault.replacement))
            try:
                run = _suite(copy, paths, backend, fault.tests, timeout)
            finally:
                target.write_text(source)
                copies.put((copy, paths))
            result = Result(row, fault, backend, "SURVIVED" if run.ok else "caught", run.seconds, run.detail)
            print(f"  row {row} {fault.name} [{backend}]: {result.result} ({run.seconds:.0f} s)", flush=True)
            return result

        available: dict[str, bool] = {}
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for backend, count, base in pool.map(baseline, dict.fromkeys(b for _, _, b in jobs)):
                print(f"baseline {backend} (no mutation, {count} test selections): "
                      f"{'passed' if base.ok else 'FAILED'} ({base.passed} tests) in {base.seconds:.0f} s",
                      flush=True)
                if not base.ok:
                    print(f"  the unpatched tests must pass first: {base.detail}")
                    return None
                available[backend] = base.passed > 0
                if not available[backend]:
                    print(f"  every test skipped on {backend} here ({base.detail}): its mutants are not run")
            return list(pool.map(mutant, jobs))


@dataclasses.dataclass
class Result:
    row: int
    fault: Fault
    backend: str
    result: str
    seconds: float
    detail: str


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ci", action="store_true", help="only the CI subset (each row's ci backends)")
    parser.add_argument("--only", action="append", default=[], help="only faults whose name contains this")
    parser.add_argument("--backend", action="append", default=[], choices=sorted(BACKENDS),
                        help="only these backends")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once, each on its own copy")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one mutant's tests may run; past it the mutant counts as caught "
                             "(a hang)")
    parser.add_argument("--check", action="store_true", help="only check that every snippet still matches")
    args = parser.parse_args(argv)
    problems = check_snippets()
    for problem in problems:
        print(problem)
    if problems or args.check:
        return 1 if problems else 0
    selected = [(row, f) for row, f in _rows() if not args.only or any(s in f.name for s in args.only)]
    jobs = [(row, f, b) for row, f in selected for b in (f.ci if args.ci else f.backends)
            if not args.backend or b in args.backend]
    if not jobs:
        print("no fault selected")
        return 1
    started = time.monotonic()
    results = _run_all(jobs, max(1, args.jobs), args.timeout)
    if results is None:
        return 1
    print("\n| # | fault | backend | catching test | result | time |")
    print("|---|---|---|---|---|---|")
    for r in results:
        tests = "; ".join(t.replace("conformance/tests/", "") for t in r.fault.tests)
        print(f"| {r.row} | {r.fault.name} | {r.backend} | `{tests}` | {r.result} | {r.seconds:.0f} s |")
    caught = sum(r.result == "caught" for r in results)
    survivors = [r for r in results if r.result == "SURVIVED"]
    print(f"\n{caught} of {len(results)} mutants caught, {len(results) - caught - len(survivors)} not run, "
          f"in {time.monotonic() - started:.0f} s ({args.jobs} at once)")
    for r in survivors:
        print(f"SURVIVED: row {r.row} {r.fault.name!r} on {r.backend} ({r.detail}): a hole in the suite")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
