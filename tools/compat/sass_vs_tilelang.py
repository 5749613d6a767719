"""Build one program with tile and with TileLang for an NVIDIA arch and compare their SASS (no GPU needed).

    python tools/compat/sass_vs_tilelang.py --tilelang-python /path/to/venv-with-tilelang/bin/python \
        [--arch sm_90a] [--config 256,128,64,256,3] [--size 8192]

TileLang runs in its own interpreter (it bundles its own TVM, which cannot share a process
with apache-tvm), writes its CUDA source to a temporary file, and both sources are compiled
here with nvcc to cubins. The table counts the instructions that explain a GEMM's speed:
tensor-core ops (HGMMA/HMMA), TMA loads and prefetches, proxy fences, mbarrier traffic,
global stores by width, and the registers and spills cuobjdump reports. Nothing is run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent(
    """
    import sys
    import {lang} as tilelang
    import {lang}.language as T

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

    kernel = tilelang.compile(main, target={{"kind": "cuda", "arch": "{arch}"}})
    open(sys.argv[1], "w").write(kernel.get_kernel_source())
    """
)

COUNTED = ["HGMMA", "HMMA", "UTMALDG", "UTMAPF", "UTMASTG", "FENCE.VIEW.ASYNC", "SYNCS.ARRIVE",
           "SYNCS.PHASECHK", "BAR.SYNC", "LDGSTS", "LDSM", "STG.E.U16", "STG.E.64", "STG.E.128", "STG.E ",
           "STS", "STSM"]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    import nvidia  # the nvidia-cuda-* wheels

    for root in nvidia.__path__:
        for candidate in Path(root).glob(f"cu*/bin/{name}"):
            return str(candidate)
    raise SystemExit(f"{name} not found (install the CUDA toolkit or the nvidia-cuda-{name} wheel)")


def _source(python: str, lang: str, arch: str, config: str, size: int, out: Path) -> None:
    script = out.with_suffix(".py")
    script.write_text(PROGRAM.format(lang=lang, arch=arch, config=config, size=size))
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


def _counts(cubin: Path) -> dict[str, str]:
    objdump = _tool("cuobjdump")
    sass = subprocess.run([objdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*[^;]*);", sass)
    out = {name: str(sum(1 for op in ops if (op + " ").startswith(name))) for name in COUNTED}
    usage = subprocess.run([objdump, "--dump-resource-usage", str(cubin)], capture_output=True,
                           text=True).stdout
    for key in ("REG", "STACK", "SHARED"):
        match = re.search(rf"{key}:(\d+)", usage)
        out[key] = match.group(1) if match else "?"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tilelang-python", required=True, help="a Python whose environment has tilelang")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--config", default="256,128,64,256,3", help="block_M,block_N,block_K,threads,stages")
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        tl_src, tile_src = folder / "by_tilelang.cu", folder / "by_tile.cu"
        _source(args.tilelang_python, "tilelang", args.arch, args.config, args.size, tl_src)
        _source(sys.executable, "tile.lang", args.arch, args.config, args.size, tile_src)
        probe = "import os, tilelang; print(os.path.dirname(tilelang.__file__))"
        tl_root = subprocess.run([args.tilelang_python, "-c", probe], capture_output=True,
                                 text=True).stdout.strip()
        from tile.backends.cuda._src.compiler import INCLUDE_DIR

        rows = {
            "TileLang": _counts(_cubin(tl_src, args.arch,
                                       [f"{tl_root}/src", f"{tl_root}/3rdparty/cutlass/include"])),
            "tile": _counts(_cubin(tile_src, args.arch, [str(INCLUDE_DIR)])),
        }
    keys = [*COUNTED, "REG", "STACK", "SHARED"]
    print(f"paper GEMM {args.size}^3 fp16, config {args.config}, {args.arch} (static SASS counts)\n")
    print("| | " + " | ".join(k.strip() for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, counts in rows.items():
        print(f"| {name} | " + " | ".join(counts[k] for k in keys) + " |")


if __name__ == "__main__":
    os.environ.setdefault("TILE_CACHE", "0")
    main()
