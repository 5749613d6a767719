"""GPU benchmarks of the CUDA backend (run by ``nox -s bench`` when a CUDA device is present).

    python bench/gpu.py [--arch sm_90a] [--json out.json] [--only SUBSTR] [--quick]
    python bench/gpu.py --host-overhead     # any machine: host cost of a call, driver replaced
    python bench/gpu.py --check [--out DIR] # a lent GPU: GPU tests + launch + FA figures (< 8 min)

``--check`` (also ``nox -s gpu``) runs the host-overhead figure, the tests marked ``gpu``, the
launch-overhead case (microseconds per back-to-back call of the 256^3 fp16 GEMM, against
``torch.matmul`` and TileLang when it is installed) and FA0-FA4, and writes ``check.json`` and
``check.md`` (a table for bench/RESULTS.md, with the card's name) to ``--out``.

The paper's GEMM shapes M0-M7 (fp16 in, fp32 accumulate, fp16 out) against
``torch.matmul`` (cuBLAS), the same shapes in fp8 e4m3 (bf16 out, on sm_89/sm_90a) against
``torch._scaled_mm``, and its FlashAttention shapes FA0-FA4 against torch's
``scaled_dot_product_attention``; each pair is timed with CUDA events, interleaved,
after warm-up, medians of several rounds; ratio = reference_time / tile_time. Also the
cold compile time of the GEMM to a cubin (new process, empty cache, imports excluded).
Without a CUDA device it prints why and exits 0 (nothing to measure).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from harness import Result, table, write_json

# The paper's Table 2 (M0-M7) and Table 3 (FA0-FA4).
GEMM_SHAPES = {
    "M0": (4096, 1024, 8192), "M1": (4096, 8192, 8192), "M2": (4096, 28672, 8192),
    "M3": (4096, 8192, 28672), "M4": (8192, 1024, 8192), "M5": (8192, 8192, 8192),
    "M6": (8192, 28672, 8192), "M7": (8192, 8192, 28672),
}
FA_SHAPES = {  # batch, heads, seq_len, head_dim, causal
    "FA0": (1, 32, 512, 128, True), "FA1": (1, 32, 512, 128, False), "FA2": (1, 32, 1024, 128, True),
    "FA3": (1, 32, 1024, 128, False), "FA4": (1, 32, 4096, 128, True),
}


def _events_ms(fn: Callable[[], Any], torch: Any) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


def timed_pair(tile: Callable[[], Any], ref: Callable[[], Any], torch: Any, rounds: int = 9,
               inner: int = 5) -> tuple[float, float]:
    """Median seconds per call of ``tile`` and ``ref``, interleaved rounds of ``inner`` calls each."""
    for _ in range(3):
        tile()
        ref()
    torch.cuda.synchronize()
    t, r = [], []
    for _ in range(rounds):
        t.append(_events_ms(lambda: [tile() for _ in range(inner)], torch) / inner)
        r.append(_events_ms(lambda: [ref() for _ in range(inner)], torch) / inner)
    return statistics.median(t) / 1e3, statistics.median(r) / 1e3


DEFAULT_GEMM_CONFIG = "auto"  # tile.ops.gemm.gemm_config: the tiling the library picks for the shape


def gemm_result(name: str, m: int, n: int, k: int, arch: str, torch: Any,
                config: str = DEFAULT_GEMM_CONFIG) -> Result:
    import tile.lang as tilelang
    from tile.ops.gemm import GemmConfig, gemm_config, matmul_kernel

    target = {"kind": "cuda", "arch": arch}
    tiling = gemm_config(m, n, k, "float16", target) if config == "auto" else GemmConfig.parse(config)
    config = str(tiling)
    kern = tilelang.compile(matmul_kernel(m, n, k, dtype="float16", accum_dtype="float32",
                                          **dataclasses.asdict(tiling)),
                            out_idx=[-1], target=target)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kern(a, b), a @ b, rtol=2e-2, atol=2e-1)
    ts, rs = timed_pair(lambda: kern(a, b), lambda: torch.matmul(a, b), torch)
    flops = 2.0 * m * n * k
    label = f" [{config}]"
    return Result(f"{name} GEMM {m}x{n}x{k} fp16{label}", "torch.matmul (cuBLAS)", ts, rs, rs / ts,
                  flops / ts / 1e9, None, None, None, None)


def fp8_gemm_result(name: str, m: int, n: int, k: int, arch: str, torch: Any) -> Result:
    """fp8 e4m3 ``A (M, K) @ W.T`` with W (N, K), float32 accumulation, bfloat16 out, against
    ``torch._scaled_mm`` (cuBLASLt) with unit scales: what a user with fp8 weights picks."""
    import tile.lang as tilelang
    from tile.ops.gemm import fp8_matmul_kernel, gemm_config

    target = {"kind": "cuda", "arch": arch}
    tiling = gemm_config(m, n, k, "float8_e4m3fn", target)
    kern = tilelang.compile(fp8_matmul_kernel(m, n, k, "float8_e4m3fn", "bfloat16", tiling),
                            out_idx=[-1], target=target)
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")

    def ref() -> Any:
        return torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    want = ref().float()
    got = kern(a, w).float()
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2 * float(want.abs().max()))
    ts, rs = timed_pair(lambda: kern(a, w), ref, torch)
    return Result(f"{name} GEMM {m}x{n}x{k} fp8 e4m3 -> bf16 [{tiling}]", "torch._scaled_mm (cuBLASLt)",
                  ts, rs, rs / ts, 2.0 * m * n * k / ts / 1e9, None, None, None, None)


TF32_WIDE_TILE = "128x256x32:3:256:8"
"""The float32 tile with a warpgroup MMA: the fp16 wide tile's 128 bytes of K per row (32 floats,
one 128-byte swizzle row, four tf32 k8 steps), 3 stages in 144 KiB of shared memory."""


def tf32_gemm_result(name: str, m: int, n: int, k: int, arch: str, torch: Any) -> Result:
    """float32 ``A (M, K) @ W.T`` with W (N, K), both K-major (tf32 wgmma on sm_90a, mma.sync's
    tf32 elsewhere), float32 out, against ``torch.matmul`` with TF32 allowed (cuBLAS TF32):
    what a user of float32 weights gets from torch by default on setting ``allow_tf32``."""
    import tile.lang as tilelang
    from tile.backends.cuda.arch import capabilities
    from tile.ops.gemm import GemmConfig, fp8_matmul_kernel

    tiling = GemmConfig.parse(TF32_WIDE_TILE if capabilities(arch).wgmma else "128x128x32:3:128")
    kern = tilelang.compile(fp8_matmul_kernel(m, n, k, "float32", "float32", tiling),
                            out_idx=[-1], target={"kind": "cuda", "arch": arch})
    a = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda")
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        want = a.double() @ w.double().T
        got = kern(a, w)
        # tf32 keeps 10 mantissa bits of each operand (cut, not rounded): a product is off by up
        # to 2^-9 of its size; float32 sums add less than that over K = 8192
        bound = 2.0**-8 * float((a.abs().double() @ w.abs().double().T).max())
        assert float((got.double() - want).abs().max()) <= bound, "tf32 GEMM out of tf32's error bound"
        ts, rs = timed_pair(lambda: kern(a, w), lambda: torch.matmul(a, w.T), torch)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return Result(f"{name} GEMM {m}x{n}x{k} fp32 as tf32 [{tiling}]", "torch.matmul (cuBLAS, allow_tf32)",
                  ts, rs, rs / ts, 2.0 * m * n * k / ts / 1e9, None, None, None, None)


DEFAULT_FA_CONFIG = "128x128:2:256"


def attention_result(name: str, shape: tuple[int, int, int, int, bool], arch: str, torch: Any,
                     config: str = DEFAULT_FA_CONFIG) -> Result:
    import tile.lang as tilelang
    from tile.ops.attention import flash_attention_kernel

    batch, heads, seq, dim, causal = shape
    tiles, stages, threads = config.split(":")
    bm, bn = (int(x) for x in tiles.split("x"))
    kern = tilelang.compile(flash_attention_kernel(batch, heads, seq, dim, causal, dtype="float16",
                                                   block_M=bm, block_N=bn, num_stages=int(stages),
                                                   threads=int(threads)),
                            out_idx=[-1], target={"kind": "cuda", "arch": arch})
    q, k, v = (torch.randn(batch, seq, heads, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ref = sdpa(qt, kt, vt, is_causal=causal).transpose(1, 2)
    torch.testing.assert_close(kern(q, k, v), ref, rtol=2e-2, atol=2e-2)
    ts, rs = timed_pair(lambda: kern(q, k, v), lambda: sdpa(qt, kt, vt, is_causal=causal), torch)
    flops = 4.0 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
    label = ("" if config == DEFAULT_FA_CONFIG else f" [{config}]")
    label = f"{' causal' if causal else ''}{label}"
    return Result(f"{name} FlashAttention b{batch} h{heads} s{seq} d{dim}{label}",
                  "torch SDPA", ts, rs, rs / ts, flops / ts / 1e9, None, None, None, None)


def in_language(factory: Callable[..., Any], language: Any) -> Callable[..., Any]:
    """A tile program factory whose ``T`` is another TileLang-compatible language module: the
    paper GEMM's text (``tile.lang.demo.matmul``), built by TileLang itself
    (``tilelang.language``) for the comparison. Only the factory's own globals change, so it
    must be the function whose body holds the program, not a wrapper that calls one."""
    swapped = types.FunctionType(factory.__code__, {**factory.__globals__, "T": language}, factory.__name__,
                                 factory.__defaults__, factory.__closure__)
    swapped.__kwdefaults__ = factory.__kwdefaults__  # keyword-only defaults (num_stages, threads, ...)
    return swapped


def host_bound_us(call: Callable[[], Any], torch: Any, calls: int = 2000, rounds: int = 5) -> float:
    """Wall-clock microseconds per call of ``calls`` back-to-back calls (then one sync): what a
    small kernel costs when the GPU waits for the host. Median of ``rounds``."""
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def launch_overhead_results(arch: str, torch: Any) -> tuple[list[Result], dict[str, str]]:
    """us/call of the 256^3 fp16 GEMM back to back: tile against torch.matmul and TileLang."""
    import tile.lang as tilelang
    from tile.lang.demo import matmul as paper_gemm
    from tile.ops.gemm import matmul_kernel

    m = n = k = 256
    tiling = {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3, "threads": 128}
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    target = {"kind": "cuda", "arch": arch}
    kern = tilelang.compile(matmul_kernel(m, n, k, **tiling), out_idx=[-1], target=target)
    torch.testing.assert_close(kern(a, b), a @ b, rtol=2e-2, atol=2e-1)
    tile_us = host_bound_us(lambda: kern(a, b), torch)
    torch_us = host_bound_us(lambda: torch.matmul(a, b), torch)
    figures = {"launch overhead, 256^3 fp16 GEMM back to back (target <= 8 us)":
               f"tile {tile_us:.1f} us/call, torch.matmul {torch_us:.1f} us/call "
               f"{'(met)' if tile_us <= 8 else '(MISSED)'}"}
    name = "launch overhead, 256^3 fp16 GEMM back to back (us/call: notes)"
    results = [Result(name, "torch.matmul", tile_us * 1e-6, torch_us * 1e-6, torch_us / tile_us,
                      None, None, None, None, None)]
    try:
        import tilelang  # type: ignore[import-not-found]
        import tilelang.language as tl_T  # type: ignore[import-not-found]
    except ImportError:
        figures["TileLang"] = "not installed: no TileLang figure"
        return results, figures
    # the paper GEMM itself: matmul_kernel only forwards to it, so swapping matmul_kernel's
    # own T would leave the program built by tile's language (and time tile twice)
    blocks = (tiling["block_M"], tiling["block_N"], tiling["block_K"])
    ref = tilelang.compile(in_language(paper_gemm, tl_T)(m, n, k, *blocks, "float16", "float32",
                                                         num_stages=tiling["num_stages"],
                                                         threads=tiling["threads"]), out_idx=[-1])
    torch.testing.assert_close(ref(a, b), a @ b, rtol=2e-2, atol=2e-1)
    tl_us = host_bound_us(lambda: ref(a, b), torch)
    figures["TileLang"] = f"{tilelang.__version__}: {tl_us:.1f} us/call"
    results.append(Result(name, "TileLang", tile_us * 1e-6, tl_us * 1e-6, tl_us / tile_us,
                          None, None, None, None, None))
    return results, figures


GPU_TESTS = ["packages/tile-backends-cuda/tests"]
CHECK_SECONDS = 8 * 60


def run_gpu_tests(seconds: int) -> tuple[bool, str]:
    """``pytest -m gpu`` on the CUDA backend's tests; (passed, the summary line)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
               *[os.path.join(root, t) for t in GPU_TESTS]]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds, cwd=root)
    except subprocess.TimeoutExpired:
        return False, f"GPU tests: still running after {seconds} s (stopped)"
    lines = [line for line in done.stdout.strip().splitlines() if line.strip()]
    summary = lines[-1] if lines else done.stderr.strip()[-300:]
    if done.returncode != 0:
        print(done.stdout[-4000:], file=sys.stderr)
    return done.returncode == 0, f"GPU tests (-m gpu): {summary}"


def check(args: argparse.Namespace) -> None:
    """The one-command GPU check: host overhead, GPU tests, launch overhead, FA0-FA4."""
    import host_overhead

    started = time.perf_counter()
    extra: dict[str, str] = {"arch": args.arch}
    failures: list[str] = []
    host = host_overhead.report(host_overhead.measure(rounds=5, calls=1000))
    extra["host overhead (driver replaced)"] = host
    print(f"- {host}", flush=True)
    import torch

    if not torch.cuda.is_available():
        print("bench/gpu.py --check: no CUDA device here (torch.cuda.is_available() is False): the GPU "
              "tests, the launch-overhead case and FA0-FA4 need one; run this on a machine with an "
              "NVIDIA GPU, its driver and a CUDA build of torch")
        return
    ok, summary = run_gpu_tests(240)
    extra["GPU tests"] = summary
    if not ok:
        failures.append(summary)
    results: list[Result] = []
    try:
        launch, figures = launch_overhead_results(args.arch, torch)
        results += launch
        extra.update(figures)
    except Exception as exc:
        failures.append(f"launch overhead: {type(exc).__name__}: {str(exc)[:300]}")
    for name, shape in FA_SHAPES.items():
        if time.perf_counter() - started > CHECK_SECONDS - 60:
            failures.append(f"{name}: not run (the check's {CHECK_SECONDS} s budget)")
            continue
        try:
            results.append(attention_result(name, shape, args.arch, torch))
            print(f"  {results[-1].name}: {results[-1].ratio:.2f}x", file=sys.stderr, flush=True)
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
    extra.update(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                 **{"check wall time": f"{time.perf_counter() - started:.0f} s"})
    text = table(results, extra)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "check.json"), results, extra)
    with open(os.path.join(args.out, "check.md"), "w") as f:
        f.write(f"## GPU check on {extra['device']} (`python bench/gpu.py --check`)\n\n{text}\n")
    print(f"\nwritten: {args.out}/check.json, {args.out}/check.md")
    if failures:
        print("\nFAILED:\n" + "\n".join(failures))
        sys.exit(1)


COLD_COMPILE = """
import time
import tile.lang as tilelang
from tile.ops.gemm import matmul_kernel
program = matmul_kernel(4096, 4096, 4096, dtype="float16", accum_dtype="float32",
                        block_M=128, block_N=128, block_K=32, num_stages=3)
start = time.perf_counter()
tilelang.compile(program, out_idx=[-1], target={"kind": "cuda", "arch": "%s"})
print(time.perf_counter() - start)
"""


def cold_compile_seconds(arch: str) -> float:
    """Best of two new processes, each into an empty kernel cache, with Python's bytecode cache on
    (as on a user's machine; see bench/run.py) after one warm-up process."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times = []
    with tempfile.TemporaryDirectory() as pycache:
        for _ in range(3):
            with tempfile.TemporaryDirectory() as cache_dir:
                env.update(TILE_CACHE="1", TILE_CACHE_DIR=cache_dir, PYTHONPYCACHEPREFIX=pycache)
                done = subprocess.run([sys.executable, "-c", COLD_COMPILE % arch], env=env,
                                      capture_output=True, text=True, check=True)
                times.append(float(done.stdout.strip().splitlines()[-1]))
    return min(times[1:])


def _launch_rows(arch: str, torch: Any, extra: dict[str, str]) -> Result:
    rows, figures = launch_overhead_results(arch, torch)
    extra.update(figures)  # the TileLang figure, when installed, is among these
    return rows[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--json", default=os.path.join(tempfile.gettempdir(), "tile-bench-gpu.json"))
    parser.add_argument("--only", help="run only the cases whose name contains this text")
    parser.add_argument("--quick", action="store_true", help="M0 (fp16 and fp8) and FA0 only")
    parser.add_argument("--gemm-configs", default=DEFAULT_GEMM_CONFIG,
                        help="comma-separated GEMM tilings BMxBNxBK:stages:threads[:panel] or auto "
                             "(the library's choice per shape), each timed on every shape")
    parser.add_argument("--fa-configs", default=DEFAULT_FA_CONFIG,
                        help="comma-separated FlashAttention tilings BMxBN:stages:threads")
    parser.add_argument("--no-cold-compile", action="store_true", help="skip the cold-compile figure")
    parser.add_argument("--host-overhead", action="store_true",
                        help="only the host cost of a call, driver replaced (runs anywhere)")
    parser.add_argument("--check", action="store_true",
                        help="GPU tests + launch overhead + FA0-FA4 in under 8 minutes (a lent GPU)")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "tile-gpu-check"),
                        help="where --check writes check.json and check.md")
    args = parser.parse_args()
    if args.host_overhead:
        import host_overhead

        host_overhead.main()
        return
    if args.check:
        check(args)
        return
    # The cold compile needs nvcc, not a GPU: it is measured on every machine.
    extra: dict[str, str] = {"arch": args.arch}
    failures: list[str] = []
    from tile.backends.cuda import probe_nvcc
    from tile.ops.gemm import GemmConfig

    if args.no_cold_compile:
        extra["cold compile"] = "not measured: skipped (--no-cold-compile)"
    elif probe_nvcc() is None:
        extra["cold compile"] = "not measured: no nvcc here"
    else:
        try:
            cold = cold_compile_seconds(args.arch)
            extra["cold compile, fp16 GEMM 4096^3 to a cubin (new process, empty cache, imports excluded; "
                  "target < 1.5 s)"] = f"{cold:.3f} s {'(met)' if cold < 1.5 else '(MISSED)'}"
        except subprocess.CalledProcessError as exc:
            failures.append(f"cold compile: {exc.stderr[-500:]}")
    import torch

    if not torch.cuda.is_available():
        print("\n".join(f"- {k}: {v}" for k, v in extra.items()))
        print("bench/gpu.py: no CUDA device here; the timed cases need one")
        if failures:
            print("\nFAILED:\n" + "\n".join(failures))
            sys.exit(1)
        return
    jobs: list[tuple[str, Callable[[], Result]]] = []
    for config in args.gemm_configs.split(","):
        if config != "auto":
            GemmConfig.parse(config)  # a malformed config fails before anything is timed
        for name, (m, n, k) in GEMM_SHAPES.items():
            jobs.append((name, lambda name=name, m=m, n=n, k=k, config=config:
                         gemm_result(name, m, n, k, args.arch, torch, config)))
    from tile.backends.cuda.arch import capabilities

    if any(i.input_dtype == "float8_e4m3fn" for i in capabilities(args.arch).mma):  # sm_89, sm_90a
        for name, (m, n, k) in GEMM_SHAPES.items():  # fp8 on the same shapes
            jobs.append((f"{name}-fp8", lambda name=name, m=m, n=n, k=k:
                         fp8_gemm_result(name, m, n, k, args.arch, torch)))
    m, n, k = GEMM_SHAPES["M0"]  # one float32 shape: its operands are twice fp16's bytes
    jobs.append(("M0-tf32", lambda: tf32_gemm_result("M0", m, n, k, args.arch, torch)))
    jobs.append(("launch", lambda: _launch_rows(args.arch, torch, extra)))
    for config in args.fa_configs.split(","):
        for name, shape in FA_SHAPES.items():
            jobs.append((name, lambda name=name, shape=shape, config=config:
                         attention_result(name, shape, args.arch, torch, config)))
    if args.quick:
        jobs = [j for j in jobs if j[0] in ("M0", "M0-fp8", "FA0", "launch")]
    results: list[Result] = []
    for name, job in jobs:
        if args.only and args.only not in name:
            continue
        try:
            results.append(job())
            print(f"  {results[-1].name}: {results[-1].ratio:.2f}x", file=sys.stderr, flush=True)
        except Exception as exc:  # report and go on: one broken case must not hide the others
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
            print(f"  {name}: FAILED {failures[-1]}", file=sys.stderr, flush=True)
    extra.update(device=torch.cuda.get_device_name(0), torch=torch.__version__)
    print(table(results, extra))
    write_json(args.json, results, extra)
    if failures:
        print("\nFAILED cases:\n" + "\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
