"""Build one program with tile and with TileLang for an NVIDIA arch and compare their SASS (no GPU needed).

    python tools/compat/sass_vs_tilelang.py --tilelang-python /path/to/venv-with-tilelang/bin/python \
        [--program gemm|fa|fa-causal] [--arch sm_90a] [--config ...] [--keep DIR]

``gemm`` is the paper GEMM (``--size`` cubed, config ``block_M,block_N,block_K,threads,stages``,
default 256,128,64,256,3); ``fa`` and ``fa-causal`` are a FlashAttention forward
(batch 8, 32 heads, sequence 4096, head dim 128, BSHD layout; config
``block_M,block_N,threads,stages``, default 128,128,256,2). The program text is the same
for both compilers; only the import differs.

TileLang runs in its own interpreter (it bundles its own TVM, which cannot share a process
with apache-tvm), writes its CUDA source to a temporary file, and both sources are compiled
here with nvcc to cubins. The table counts the instructions that explain a kernel's speed:
tensor-core ops (HGMMA by shape, HMMA), wgmma waits, setmaxnreg, TMA loads, stores and
tensor-map prefetches, proxy fences and memory barriers, mbarrier and CTA-barrier traffic,
shared and global accesses by width, local-memory spills, and the registers cuobjdump
reports. Counts are static (instructions in the binary, not executed ones). Nothing is run.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

GEMM = textwrap.dedent(
    """
    M = N = K = {size}
    block_M, block_N, block_K, threads, stages = {config}

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    """
)

# Online softmax in base 2 (the scale folds log2(e) in). The running maximum is reduced
# into in place (clear=False), so the previous maximum needs no separate max step.
FLASH_ATTENTION = textwrap.dedent(
    """
    batch, heads, seq_len, dim = 8, 32, {size}, 128
    block_M, block_N, threads, stages = {config}
    causal = {causal}
    scale = 1.44269504 / dim ** 0.5
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
             O: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_tile = T.alloc_shared([block_M, dim], "float16")
            k_tile = T.alloc_shared([block_N, dim], "float16")
            v_tile = T.alloc_shared([block_N, dim], "float16")
            o_tile = T.alloc_shared([block_M, dim], "float16")
            scores = T.alloc_fragment([block_M, block_N], "float32")
            probs = T.alloc_fragment([block_M, block_N], "float16")
            out = T.alloc_fragment([block_M, dim], "float32")
            row_max = T.alloc_fragment([block_M], "float32")
            prev_max = T.alloc_fragment([block_M], "float32")
            correction = T.alloc_fragment([block_M], "float32")
            tile_sum = T.alloc_fragment([block_M], "float32")
            denominator = T.alloc_fragment([block_M], "float32")
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_tile)
            T.fill(out, 0)
            T.fill(denominator, 0)
            T.fill(row_max, -T.infinity("float32"))
            steps = T.ceildiv(seq_len, block_N)
            if causal:
                steps = T.min(steps, T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(steps, num_stages=stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_tile)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        visible = bx * block_M + i >= k * block_N + j
                        scores[i, j] = T.if_then_else(visible, 0, -T.infinity("float32"))
                else:
                    T.clear(scores)
                T.gemm(q_tile, k_tile, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, prev_max)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    correction[i] = T.exp2((prev_max[i] - row_max[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    scores[i, j] = T.exp2((scores[i, j] - row_max[i]) * scale)
                T.reduce_sum(scores, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    denominator[i] = denominator[i] * correction[i] + tile_sum[i]
                T.copy(scores, probs)
                for i, j in T.Parallel(block_M, dim):
                    out[i, j] *= correction[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_tile)
                T.gemm(probs, v_tile, out, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                out[i, j] /= denominator[i]
            T.copy(out, o_tile)
            T.copy(o_tile, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    """
)

PROGRAMS = {
    # name: (text, default config, default size, what the table's title says)
    "gemm": (GEMM, "256,128,64,256,3", 8192, "paper GEMM {size}^3 fp16"),
    "fa": (FLASH_ATTENTION.replace("{causal}", "False"), "128,128,256,2", 4096,
           "FlashAttention forward 8x32x{size}x128 fp16"),
    "fa-causal": (FLASH_ATTENTION.replace("{causal}", "True"), "128,128,256,2", 4096,
                  "causal FlashAttention forward 8x32x{size}x128 fp16"),
}

DRIVER = textwrap.dedent(
    """
    import sys
    import {lang} as tilelang
    import {lang}.language as T
    {program}
    kernel = tilelang.compile(main, target={{"kind": "cuda", "arch": "{arch}"}})
    open(sys.argv[1], "w").write(kernel.get_kernel_source())
    """
)

# (column, the SASS opcodes it sums: each names an opcode and all its modifiers, "STS" counts
# STS.128 but not STSM).
COUNTED = [
    ("HGMMA", ("HGMMA",)), ("HMMA", ("HMMA",)), ("wgmma waits", ("WARPGROUP.DEPBAR",)),
    ("UTMALDG", ("UTMALDG",)), ("tensormap prefetch", ("UTMACCTL.PF",)), ("UTMASTG", ("UTMASTG",)),
    ("FENCE.VIEW.ASYNC", ("FENCE.VIEW.ASYNC",)), ("MEMBAR", ("MEMBAR",)),
    ("SYNCS arrive", ("SYNCS.ARRIVE",)), ("SYNCS phase check", ("SYNCS.PHASECHK",)),
    ("BAR.SYNC", ("BAR.SYNC",)), ("LDGSTS", ("LDGSTS",)), ("LDG", ("LDG",)), ("LDSM", ("LDSM",)),
    ("LDS", ("LDS",)), ("STS", ("STS",)), ("STSM", ("STSM",)),
    ("STG 16/32/64/128-bit", ("STG",)), ("spill STL/LDL", ("STL", "LDL")),
]
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)([^;]*);")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    import nvidia  # the nvidia-cuda-* wheels

    for root in nvidia.__path__:
        for candidate in Path(root).glob(f"cu*/bin/{name}"):
            return str(candidate)
    raise SystemExit(f"{name} not found (install the CUDA toolkit or the nvidia-cuda-{name} wheel)")


def _source(python: str, lang: str, program: str, arch: str, out: Path) -> None:
    script = out.with_suffix(".py")
    script.write_text(DRIVER.format(lang=lang, arch=arch, program=textwrap.indent(program, "")))
    run = subprocess.run([python, str(script), str(out)], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{lang} could not build the program:\n{run.stderr[-3000:]}")


def _cubin(source: Path, arch: str, includes: list[str]) -> Path:
    cubin = source.with_suffix(".cubin")
    args = [_tool("nvcc"), f"-arch={arch}", "-cubin", "-O3", "-std=c++17", "-w", "-o", str(cubin),
            str(source)]
    run = subprocess.run(args + [f"-I{i}" for i in includes], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"nvcc failed on {source}:\n{run.stderr[-3000:]}")
    return cubin


def count_sass(sass: str) -> dict[str, str]:
    """The table's cells for one kernel's disassembly (``cuobjdump -sass``)."""
    ops = [(op, rest) for op, rest in _INSTRUCTION.findall(sass)]
    out: dict[str, str] = {}
    for column, prefixes in COUNTED:
        dotted = tuple(p + "." for p in prefixes)
        out[column] = str(sum(1 for op, _ in ops if op in prefixes or op.startswith(dotted)))
    shapes = collections.Counter(op.split(".")[1] for op, _ in ops if op.startswith("HGMMA."))
    if shapes:
        out["HGMMA"] += " (" + ", ".join(f"{n} m{s.replace('x', 'n', 1).replace('x', 'k')}"
                                        for s, n in sorted(shapes.items())) + ")"
    widths = collections.Counter(
        {"E.U16": 16, "E.64": 64, "E.128": 128}.get(".".join(op.split(".")[1:3]), 32)
        for op, _ in ops if op.startswith("STG."))
    out["STG 16/32/64/128-bit"] = "/".join(str(widths.get(w, 0)) for w in (16, 32, 64, 128))
    maxnreg = {"consumer": "-", "producer": "-"}  # setmaxnreg.inc / .dec
    for op, rest in ops:
        if op.startswith("USETMAXREG"):
            role = "producer" if ".DEALLOC" in op else "consumer"
            maxnreg[role] = str(int(rest.rsplit(",", 1)[-1].strip(), 16))
    out["setmaxnreg inc / dec"] = f"{maxnreg['consumer']} / {maxnreg['producer']}"
    return out


def _counts(cubin: Path) -> dict[str, str]:
    objdump = _tool("cuobjdump")
    sass = subprocess.run([objdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    out = count_sass(sass)
    usage = subprocess.run([objdump, "--dump-resource-usage", str(cubin)], capture_output=True,
                           text=True).stdout
    for key in ("REG", "STACK"):
        match = re.search(rf"{key}:(\d+)", usage)
        out[key] = match.group(1) if match else "?"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tilelang-python", required=True, help="a Python whose environment has tilelang")
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="gemm")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--config", help="gemm: block_M,block_N,block_K,threads,stages; "
                        "fa: block_M,block_N,threads,stages")
    parser.add_argument("--size", type=int, help="gemm: M = N = K; fa: sequence length")
    parser.add_argument("--keep", type=Path, help="also write both sources and SASS listings here")
    args = parser.parse_args()
    text, config, size, title = PROGRAMS[args.program]
    config, size = args.config or config, args.size or size
    program = text.format(config=config, size=size)
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        tl_src, tile_src = folder / "by_tilelang.cu", folder / "by_tile.cu"
        _source(args.tilelang_python, "tilelang", program, args.arch, tl_src)
        _source(sys.executable, "tile.lang", program, args.arch, tile_src)
        probe = "import os, tilelang; print(os.path.dirname(tilelang.__file__))"
        tl_root = subprocess.run([args.tilelang_python, "-c", probe], capture_output=True,
                                 text=True).stdout.strip()
        from tile.backends.cuda._src.compiler import GPU_INCLUDE_DIR, INCLUDE_DIR

        cubins = {
            "TileLang": _cubin(tl_src, args.arch, [f"{tl_root}/src", f"{tl_root}/3rdparty/cutlass/include"]),
            "tile": _cubin(tile_src, args.arch, [str(INCLUDE_DIR), str(GPU_INCLUDE_DIR)]),
        }
        rows = {name: _counts(cubin) for name, cubin in cubins.items()}
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for name, cubin in cubins.items():
                shutil.copy(cubin.with_suffix(".cu"), args.keep / f"{args.program}_{name}.cu")
                sass = subprocess.run([_tool("cuobjdump"), "-sass", str(cubin)], capture_output=True,
                                      text=True, check=True).stdout
                (args.keep / f"{args.program}_{name}.sass").write_text(sass)
    keys = [column for column, _ in COUNTED] + ["setmaxnreg inc / dec", "REG", "STACK"]
    print(f"{title.format(size=size)}, config {config}, {args.arch} (static SASS counts)\n")
    print("| | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, counts in rows.items():
        print(f"| {name} | " + " | ".join(counts[k] for k in keys) + " |")


if __name__ == "__main__":
    os.environ.setdefault("TILE_CACHE", "0")
    main()
