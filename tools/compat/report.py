"""Write docs/compat.md: TileLang's public names and their status in tile, and pass rates.

    python tools/compat/report.py /path/to/tilelang-checkout --source "tile-ai/tilelang@<commit>" \
        [--results examples.json testing.json] [--measured "2026-11-26, CPU"] --out docs/compat.md

The name tables come from the checkout's source (``tilelang_names.py``) and from importing
``tile.lang`` here: a name is *implemented* when tile has it (same name and call form),
*differs* where ``DIFFERS`` says how, *not applicable* where tile refuses it on purpose
(``tile.lang._src.unsupported``) or ``NOT_APPLICABLE`` says why, and *missing* otherwise.
"Used by" counts the examples and tests of the checkout that write ``T.<name>``.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tilelang_names import SourceTree  # noqa: E402

import tile.lang as tile_lang  # noqa: E402
import tile.lang.language as T  # noqa: E402
from tile.lang._src.unsupported import UNSUPPORTED  # noqa: E402

DIFFERS: dict[str, str] = {
    "copy": "regions of different extents copy the more local operand's region, as TileLang does, with a "
    "TileWarning at the line; `loop_layout=` and `annotations=` are accepted and have no effect",
    "ieee_add": "round-to-nearest-even only; other rounding modes raise TileTypeError",
    "ieee_sub": "round-to-nearest-even only",
    "ieee_mul": "round-to-nearest-even only",
    "ieee_fdiv": "round-to-nearest-even only",
    "ieee_fmaf": "round-to-nearest-even only",
    "ieee_frcp": "round-to-nearest-even only",
    "ieee_fsqrt": "round-to-nearest-even only",
    "fast_rcp": "computes the exact reciprocal",
    "alloc_global": "scratch allocated inside the kernel: on the CPU each block has its own",
    "alloc_buffer": "scope defaults to 'local'",
    "dtype": "a str subclass: T.dtype('float16') == 'float16'; .bits, .lanes, .as_torch()",
    "get_thread_binding": "rejected by the CPU backend (kernels there are block-level)",
    "print": "lines prefixed with the block index (tile.lang's debug printing); `T.print(msg=...)` alone "
    "prints the message; `warp_group_id`/`warp_id` are accepted, each fragment element is printed by the "
    "thread holding it",
    "Kernel": "one T.Kernel per prim_func",
    "gemm": "operands from shared or fragment tiles; T.gemm(impl='cute') on CUDA",
    "annotate_min_blocks_per_sm": "a hint with no effect",
    "annotate_producer_reg_dealloc": "a hint with no effect; T.set_max_nreg acts",
    "annotate_consumer_reg_alloc": "a hint with no effect; T.set_max_nreg acts",
    "annotate_l2_hit_ratio": "a hint with no effect",
    "pdl_trigger": "no-op: tile launches without PDL",
    "pdl_sync": "no-op: without PDL the stream orders kernels",
    "no_set_max_nreg": "no-op: tile adds no register reallocation to hand-written kernels",
    "disable_warp_group_reg_alloc": "no-op, as no_set_max_nreg",
    "shuffle_elect": "elects the first thread of each group",
    "ptx_cp_async": "CUDA only; the count is of elements (4/8/16 bytes in all), predicate= zero-fills",
    "alloc_barrier": "CUDA sm_90+ only (mbarrier); the CPU backend rejects thread-level code",
    "ws": "CUDA only: an if on the warpgroup index",
    "tma_copy": "a T.copy that has landed when the statement ends; the barrier only orders threads",
    "async_copy": "a T.copy that has completed when the statement ends",
    "wgmma_gemm": "T.gemm (wgmma on sm_90a where the operands allow, else mma); it waits for itself",
    "tfloat32": (
        "float32 storage; T.gemm multiplies float32 operands as tf32 on NVIDIA tensor cores (mma.sync, "
        "sm_90a wgmma: the top 19 bits of each), in float32 on the CPU and AMD backends"
    ),
    "float8_e4m3": (
        "float8_e4m3fn (the OCP e4m3: no infinities, largest 448), as TileLang's CUDA code stores it "
        "and torch receives it; apache-tvm's IEEE-style float8_e4m3 is not a tile type"
    ),
    "alloc_reducer": "shared memory with atomic updates; ops sum/max/min",
    "atomic_load": "a plain load of the element (aligned loads are single transactions)",
    "atomic_store": "a plain store of the element",
    "sync_grid": "at the top level of a kernel body: the kernel is split into two launches there",
    "cp_async_barrier_noinc": "waits for this thread's cp.async copies (committed or not), then arrives",
    "tma_store_arrive": "no-op: tile's copies to global memory complete before the next statement",
    "tma_store_wait": "no-op: tile's copies to global memory complete before the next statement",
    "wait_wgmma": "waits for wgmma batches a hand-written kernel committed; T.gemm waits for its own",
    "match_any_sync": "32 shuffles and compares (the emulator has no __match_any_sync)",
    "match_all_sync": "built on match_any_sync",
    "syncthreads_count": "a shared counter between two barriers",
    "syncthreads_and": "a shared counter between two barriers",
    "syncthreads_or": "a shared counter between two barriers",
    "annotate_ws_schedule": "its form is checked; tile's compiler assigns warps itself",
    "annotate_safe_value": (
        "guards element reads of the tensor (if_then_else); tile operators keep their own bounds handling"
    ),
    "annotate_restrict_buffers": "a hint with no effect",
    "ws_op": "names statements for a schedule; they run as written",
    "Persistent": "tiles numbered in panels of group_size along the last dimension (tile's own order)",
    "PersistentTileScheduler": "num_workers defaults to the kernel's grid size",
    "rng_init": "Philox4x32-10 for every generator name (not curand's streams); every backend",
    "rng_rand": "Philox4x32-10; in T.Parallel, iteration i draws what a serial loop's i-th draw would",
    "rng_rand_float": "uniform [0, 1) from 24/53 bits; normal by Box-Muller",
    "atomic_or": "a thread's atomicOr; on the CPU the plain update, blocks in turn",
    "cast": "round=/sat=/rbits= checked as TileLang checks them; round='rz'/'rp'/'rm' and sat=False are the "
    "default conversion with a TileWarning (reserved in TileLang's CUDA backend too); round='rs' (sm_100a) "
    "refused",
    "annotate_pass_configs": "checked at the kernel line; merged with compile(pass_configs=)",
    "named_barrier_arrive": "CUDA targets (bar.arrive); wait with T.sync_threads(barrier_id, count)",
    "sync_threads": "T.sync_threads(id, count) is bar.sync on CUDA targets; T.sync_threads() runs everywhere",
    "mbarrier_expect_tx": "CUDA sm_90+ only (mbarrier), as alloc_barrier",
    "annotate_compile_flags": "CUDA targets (nvcc/NVRTC, after tile's own flags); other targets refuse it; "
    "the emulator runs the source without them",
    "Ref": "on T.macro parameters; a macro that calls itself needs @T.macro(hygienic=False)",
    "atomic_add": "return_prev=True through `tile::atomic_add` on GPU targets; on the CPU the plain update, "
    "blocks in turn. A scalar into a slice or whole buffer (`T.atomic_add(A[0:8, 0:8], 1.0)`) updates "
    "every element, once per block",
    "atomic_max": "return_prev=True for int32/uint32/float32/float16/bfloat16 (GPU floats by "
    "compare-and-swap; the CPU's plain update); a scalar into a tile as `atomic_add`",
    "atomic_min": "return_prev=True on GPU targets and integers only (atomicMin)",
    "StridedTensor": "the CPU backend runs strided views; GPU targets refuse them at the kernel "
    "(their launchers pass row-major tensors)",
    "gemm_sp": "2:4 (fp32 1:2) metadata in TileLang's ordered layout; A is expanded into a dense "
    "shared tile for T.gemm (no sparse tensor-core instructions)",
    "float4_e2m1_unpacked": "uint8 storage, one code per byte; T.float4_e2m1_unpacked(x) encodes "
    "(ties to even, saturating at 6), .decode(code) reads",
    "initialize_wgmma_descriptor": "CUDA sm_90a; base offset 0 (swizzle patterns start on their boundary)",
    "ptx_wgmma_ss": "CUDA sm_90a; fp16/bf16 operands with fp32 accumulators, no operand negation",
    "ptx_ldmatrix": "CUDA sm_80+; (trans, num, src_ptr, dst_ptr) and TVM's 8-argument form, .b16",
    "ptx_mma": "CUDA sm_80+; m16n8k16 fp16/bf16, m16n8k32 int8/uint8, m16n8k8 tf32; no .satfinite",
    "create_tma_descriptor": "CUDA sm_90; the map is encoded at launch from the tensor passed; one box "
    "shape per tensor, 2-D boxes, element strides 1, zero out-of-bounds fill",
    "tma_load": "CUDA sm_90; one thread issues it, completing on the program's mbarrier",
}
NOT_APPLICABLE_TOP: dict[str, str] = {
    "dll_dirs": "Windows DLL loading internals",
    "runtime_dll_dirs": "Windows DLL loading internals",
    "get_windows_runtime_dll_dirs": "Windows DLL loading internals",
    "prepend_dll_search_path": "Windows DLL loading internals",
    "libinfo": "locates TileLang's C++ library; tile has none",
    "build_date": "TileLang build metadata",
    "register_cuda_postproc": "edits generated source; tile's backends do not take source callbacks",
    "register_hip_postproc": "edits generated source; tile's backends do not take source callbacks",
    "register_c_postproc": "edits generated source; tile's backends do not take source callbacks",
    "analysis": "TileLang's TIR analyses",
    "ir": "TileLang's IR nodes; tile's are tile.ir",
    "tileop": "TileLang's C++ tile operators; tile's are tile.ir.ops",
    "cpu": "TileLang's CPU dialect; tile's CPU backend is the tile.backends.cpu plug-in",
    "metal": "Metal is not a tile target",
    "webgpu": "WebGPU is not a tile target",
    "deprecated": "TileLang's deprecation decorator",
    "set_log_level": "TileLang's logger",
}
DIFFERS_TOP: dict[str, str] = {
    "env": "a module of tile's environment variables, where TileLang has an environment object",
    "engine": "`engine.callback` (`register_cuda_postproc_callback`, `register_hip_postproc_callback`); "
    "TileLang's lowering engine itself is not provided (tile's is tile.ir.transform and the backend "
    "plug-ins)",
    "transform": "`PassConfigKey`, `simplify_prim_func`; TileLang's passes are not provided",
    "tools": "`Analyzer` (FLOPs and global bytes of a tile program), `plot_layout`; `lower_trace` is not "
    "provided",
    "rocm": "`rocm.intrinsics` (the MFMA operand maps, `get_mma_micro_size`); TileLang's MFMA macro "
    "generators are not provided",
}
"""Top-level names tile has in another form (reachable after ``import tile.lang`` alone, as
TileLang's ``import tilelang`` makes its submodules)."""
HELPER_OWNED = {"autotune": "tile.lang.autotuner (a separate work item)"}


def status_of_language(name: str) -> tuple[str, str]:
    if name in UNSUPPORTED:
        return "not applicable", UNSUPPORTED[name][0]
    if hasattr(T, name):
        return ("differs", DIFFERS[name]) if name in DIFFERS else ("implemented", "")
    return "missing", ""


def status_of_top(name: str) -> tuple[str, str]:
    if name in NOT_APPLICABLE_TOP:
        return "not applicable", NOT_APPLICABLE_TOP[name]
    if hasattr(tile_lang, name):
        return ("differs", DIFFERS_TOP[name]) if name in DIFFERS_TOP else ("implemented", "")
    if name in HELPER_OWNED:
        return "missing", HELPER_OWNED[name]
    return "missing", ""


def usage(checkout: pathlib.Path) -> collections.Counter[str]:
    """How many example/test files write ``T.<name>``."""
    counts: collections.Counter[str] = collections.Counter()
    for folder in ("examples", "testing/python"):
        for path in (checkout / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8", errors="replace")
            if "tilelang" in text:
                counts.update(set(re.findall(r"\bT\.([A-Za-z_]\w*)", text)))
    return counts


def _folder_of(path: str) -> str:
    parts = path.split("/")
    depth = 3 if parts[0] == "testing" else 2
    return "/".join(parts[: min(depth, len(parts) - 1)])


def pass_rates(results: list[dict[str, object]]) -> tuple[list[str], list[str]]:
    by_folder: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    reasons: collections.Counter[str] = collections.Counter()
    for entry in results:
        by_folder[_folder_of(str(entry["path"]))][str(entry["status"])] += 1
        if entry["status"] in ("fail", "timeout"):
            reasons[_reason_key(str(entry["reason"]))] += 1
    rows = [
        "| folder | programs | pass | fail | timeout | skipped | pass rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    total: collections.Counter[str] = collections.Counter()
    for folder in sorted(by_folder):
        c = by_folder[folder]
        total.update(c)
        rows.append(_rate_row(folder, c))
    rows.append(_rate_row("**all**", total))
    reason_rows = ["| programs | failure reason |", "|---:|---|"]
    reason_rows += [f"| {n} | `{r}` |" for r, n in reasons.most_common(40)]
    return rows, reason_rows


def _reason_key(reason: str) -> str:
    reason = re.sub(r"\d+(\.\d+)?", "N", reason)
    return reason.replace("|", "/")[:140]


def _rate_row(folder: str, c: collections.Counter[str]) -> str:
    n = sum(c.values())
    rate = f"{100 * c['pass'] / n:.0f}%" if n else "-"
    return f"| {folder} | {n} | {c['pass']} | {c['fail']} | {c['timeout']} | {c['skip']} | {rate} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tilelang", type=pathlib.Path)
    parser.add_argument("--source", required=True, help="which TileLang snapshot the checkout is")
    parser.add_argument("--results", nargs="*", type=pathlib.Path, default=[], help="later win")
    parser.add_argument("--measured", default="", help="when and where the programs ran")
    parser.add_argument("--counted", default="", help="when and on which branch the names were counted")
    parser.add_argument("--preamble", type=pathlib.Path, help="hand-written text placed before the tables")
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args(argv)

    tree = SourceTree(args.tilelang)
    lang_names = tree.public_names("tilelang.language")
    top_names = tree.public_names("tilelang")
    used = usage(args.tilelang)

    lines = ["# TileLang compatibility", ""]
    lines.append(
        "<!-- GENERATED by tools/compat/report.py from "
        f"{args.source}; edit the preamble or the script, not this file. -->"
    )
    lines.append("")
    if args.preamble:
        lines += [args.preamble.read_text().rstrip(), ""]

    statuses = {n: status_of_language(n) for n in lang_names}
    used_names = [n for n in lang_names if used[n]]
    implemented = [n for n in used_names if statuses[n][0] in ("implemented", "differs")]
    refused = [n for n in used_names if statuses[n][0] == "not applicable"]
    absent = len(used_names) - len(implemented) - len(refused)
    lines += [
        "## Coverage of `T.*`",
        "",
        f"TileLang source: {args.source}. `tilelang.language` has {len(lang_names)} public names; "
        f"{len(used_names)} of them appear as `T.<name>` in its examples and tests. Of those, "
        f"**{len(implemented)} ({100 * len(implemented) / max(1, len(used_names)):.1f}%) are implemented** "
        f"here (same or differing as noted), {len(refused)} are refused on purpose with a typed error "
        f"(hardware tile does not target, or foreign CUDA source as a kernel), and {absent} are missing."
        + (f" Counted {args.counted}." if args.counted else ""),
        "",
    ]
    missing_used = sorted((n for n in used_names if statuses[n][0] == "missing"), key=lambda n: (-used[n], n))
    lines += [
        "Missing names that examples and tests use, most used first: "
        + (", ".join(f"`{n}` ({used[n]})" for n in missing_used) or "none"),
        "",
    ]
    if args.results:
        by_path: dict[str, dict[str, object]] = {}
        for path in args.results:  # a later file's run of a program replaces an earlier one
            by_path.update({str(entry["path"]): entry for entry in json.loads(path.read_text())})
        results = list(by_path.values())
        rows, reasons = pass_rates(results)
        lines += ["## Pass rate of TileLang's own programs under tile", "", args.measured, "", *rows, ""]
        lines += ["### Why programs fail (most common first)", "", *reasons, ""]
    lines += ["## `tilelang` (top level)", "", "| name | here | note |", "|---|---|---|"]
    for name in top_names:
        state, note = status_of_top(name)
        lines.append(f"| `{name}` | {state} | {note} |")
    lines += [
        "",
        "## `tilelang.language` (`T`)",
        "",
        "| name | used by | here | note |",
        "|---|---:|---|---|",
    ]
    for name in lang_names:
        state, note = statuses[name]
        lines.append(f"| `{name}` | {used[name] or ''} | {state} | {note} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(
        f"{args.out}: {len(implemented)}/{len(used_names)} used T.* names implemented, {len(refused)} refused"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
