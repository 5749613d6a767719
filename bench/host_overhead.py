"""Host cost of a GPU kernel call, on any machine: everything up to the driver call.

    python bench/host_overhead.py            # also: python bench/gpu.py --host-overhead

Compiles the 256^3 fp16 GEMM for sm_90a (the issue-20 kernel: warp-specialized, TMA
descriptors for A and B), then calls it back to back through ``tile.lang``'s ``JITKernel``
exactly as a user does, with the CUDA driver replaced by ``tile.ir.gpu.testing.RecordingDriver``
in counting mode (CPU torch tensors stand in for the device's; the driver's launch returns at
once). What is timed is tile's own work per call: the argument-signature check, the output's
``torch.empty``, the parameter packing, the TMA descriptor lookup, the stream query. The same
calls are then timed down to a C stand-in for libcuda (the real ``CudaDriver``), through the
native launch path (``tile.ir.gpu.native_launch``) and with it off. Medians of rounds,
microseconds per call; target <= 3 us on the project's 2-core machine, for the call as a user's
runs it (through the native path where it builds).

No GPU and no driver are needed; nvcc is used when present, else the kernel is built under
``TILE_DEVICE=emu`` (the launch recipe is the same; only the cubin is missing).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

TARGET_US = 3.0
SHAPE = (256, 256, 256)


def _aligned(torch: Any, shape: tuple[int, int], align: int = 256) -> Any:
    """A CPU fp16 tensor at an ``align``-byte boundary (TMA descriptors need 128)."""
    count = shape[0] * shape[1]
    raw = torch.randn(count + align // 2).to(torch.float16)
    offset = (-raw.data_ptr() % align) // 2
    return raw[offset : offset + count].view(shape)


def gemm_kernel(arch: str = "sm_90a") -> Any:
    """The compiled 256^3 fp16 GEMM (the library's tiling for the shape on ``arch``)."""
    import dataclasses

    import tile.lang as tilelang
    from tile.ops.gemm import gemm_config, matmul_kernel

    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        os.environ["TILE_DEVICE"] = "emu"  # codegen only: the recipe without a cubin
    m, n, k = SHAPE
    target = {"kind": "cuda", "arch": arch}
    tiling = gemm_config(m, n, k, "float16", target)
    program = matmul_kernel(m, n, k, dtype="float16", accum_dtype="float32", **dataclasses.asdict(tiling))
    return tilelang.compile(program, out_idx=[-1], target=target)


CUDA_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "packages",
                          "tile-backends-cuda", "tests")


def _ctypes_driver(directory: str) -> Any:
    """The real ``CudaDriver`` (ctypes, prototypes, bound launches) over the C stand-in for
    libcuda the CUDA tests use, built with the host compiler; None without one."""
    import ctypes

    from tile.backends.cuda._src.runtime import CudaDriver
    from tile.ir.gpu.testing import RecordingDriver

    sys.path.insert(0, CUDA_TESTS)
    from _fake_libcuda import build_fake_libcuda

    lib = build_fake_libcuda(pathlib.Path(directory))
    if lib is None:
        return None
    lib.fake_set_param_widths((ctypes.c_int * 3)(8, 8, 8), 3)  # C pointer, two tensor maps
    driver = CudaDriver(lib)
    driver.device_type = "cpu"
    driver.current_stream = lambda device: 0  # type: ignore[method-assign]
    driver.encode_tensor_map = RecordingDriver(record=False).encode_tensor_map  # type: ignore[method-assign]
    return driver


def _time(kernel: Any, a: Any, b: Any, rounds: int, calls: int) -> tuple[list[float], list[float]]:
    for _ in range(200):
        kernel(a, b)
    times, walls = [], []
    for _ in range(rounds):
        # CPU time of this thread: on a shared machine, time spent descheduled is not ours
        start, wall = time.thread_time(), time.perf_counter()
        for _ in range(calls):
            kernel(a, b)
        times.append((time.thread_time() - start) / calls * 1e6)
        walls.append((time.perf_counter() - wall) / calls * 1e6)
    return times, walls


def _two_outputs(stand_in: Any, rounds: int, calls: int) -> tuple[float, float]:
    """Microseconds per bound call of a kernel with two outputs around its input (as tile.ops'
    FlashAttention forward returns O and LSE), through the native path (-1: it did not build)
    and with it off; only its launch recipe exists, nothing is compiled."""
    import torch
    from _fake_libcuda import two_outputs_kernel  # beside the stand-in (_ctypes_driver put it on the path)

    kernel = two_outputs_kernel(stand_in)
    miss = object()
    call = kernel.bind_call([0, 2], None, 16, miss)
    x = torch.ones(4096)
    kernel(torch.empty(4096), x, torch.empty(4096, dtype=torch.float16))
    args = (x,)

    def timed() -> float:  # as _time, for the bound call (JITKernel's fast path) itself
        for _ in range(200):
            call(args)
        times = []
        for _ in range(rounds):
            start = time.thread_time()
            for _ in range(calls):
                call(args)
            times.append((time.thread_time() - start) / calls * 1e6)
        return statistics.median(times)

    binding = kernel._bindings[-1]
    native = timed() if binding.native is not None else -1.0
    binding.native = None
    return native, timed()


def measure(rounds: int = 7, calls: int = 2000) -> dict[str, float]:
    """Microseconds per call: ``median``/``best`` of the rounds with the Python recording
    driver (tile's own work), ``ctypes`` the median through the real ctypes driver path to a
    C stand-in for libcuda (-1 without a host compiler), ``native`` the same through the
    native launch path, ``two_outputs_*`` both for a kernel with two outputs, and ``alloc``
    the output's ``torch.empty`` alone."""
    import torch

    from tile.backends.cuda._src.runtime import CudaKernel
    from tile.ir.gpu.testing import RecordingDriver
    from tile.lang._src.jit import JITKernel

    compiled = gemm_kernel()
    binary = compiled.artifact.payload
    driver = RecordingDriver(record=False)

    def jit(driver: Any) -> Any:
        launcher = CudaKernel(binary.cubin, binary.recipe, binary.params, ptx=binary.ptx, driver=driver)
        return JITKernel(compiled.func, compiled.artifact, launcher, compiled.out_idx), launcher

    kernel = jit(driver)[0]
    a, b = _aligned(torch, SHAPE[:2]), _aligned(torch, SHAPE[1:])
    through_native = through_ctypes = two_native = two_ctypes = -1.0
    with tempfile.TemporaryDirectory() as directory:
        stand_in = _ctypes_driver(directory)
        if stand_in is not None:
            real, launcher = jit(stand_in)
            real(a, b)
            bindings = launcher._bindings
            if any(binding.native is not None for binding in bindings):
                through_native = statistics.median(_time(real, a, b, rounds, calls)[0])
            for binding in bindings:  # the same calls with the native path off: ctypes from Python
                binding.native = None
            through_ctypes = statistics.median(_time(real, a, b, rounds, calls)[0])
            two_native, two_ctypes = _two_outputs(stand_in, rounds, calls)
    times, walls = _time(kernel, a, b, rounds, calls)
    allocs = []
    device = torch.device("cpu")
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(calls):
            torch.empty((256, 256), dtype=torch.float16, device=device)
        allocs.append((time.thread_time() - start) / calls * 1e6)
    if driver.launch_count != 200 + rounds * calls:  # one launch per call, none skipped
        raise RuntimeError(f"expected one launch per call, the driver saw {driver.launch_count}")
    tma = sum(p.kind == "tensormap" for p in binary.recipe.params)
    return {"median": statistics.median(times), "best": min(times), "alloc": statistics.median(allocs),
            "wall": statistics.median(walls), "tensor_maps": float(tma),
            "ctypes": through_ctypes, "native": through_native,
            "two_outputs_native": two_native, "two_outputs_ctypes": two_ctypes}  # fmt: skip


def report(figures: dict[str, float]) -> str:
    """One line. The target applies to the call as a user's runs it: to the driver's C entry
    point (here a C stand-in for libcuda), through the native launch path where it built."""
    native, ctypes_path = figures["native"], figures["ctypes"]
    user = native if native >= 0 else ctypes_path if ctypes_path >= 0 else figures["median"]
    verdict = "met" if user <= TARGET_US else "MISSED"
    through = (
        f"to a C stand-in for libcuda: {native:.2f} us/call through the native launch path, "
        f"{ctypes_path:.2f} with ctypes calls from Python"
        if native >= 0
        else f"to a C stand-in for libcuda with ctypes calls from Python: {ctypes_path:.2f} us/call "
        "(the native launch path did not build)"
        if ctypes_path >= 0
        else "no host compiler: no C stand-in for libcuda"
    )
    return (
        f"host overhead, 256^3 fp16 GEMM sm_90a ({int(figures['tensor_maps'])} TMA descriptors): {through}; "
        f"tile's Python work alone (a Python recording driver): {figures['median']:.2f} us/call median CPU "
        f"time, {figures['best']:.2f} best (wall clock {figures['wall']:.2f}); of each, the output's "
        f"torch.empty {figures['alloc']:.2f}; target <= {TARGET_US:.0f} us: {verdict}"
        + (
            f"; a kernel with two outputs: {figures['two_outputs_native']:.2f} us/call native, "
            f"{figures['two_outputs_ctypes']:.2f} with ctypes"
            if figures.get("two_outputs_ctypes", -1.0) >= 0
            else ""
        )
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        os.environ.setdefault("TILE_CACHE_DIR", cache)
        print(report(measure()))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
