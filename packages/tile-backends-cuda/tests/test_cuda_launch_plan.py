"""The launch path on the host, with the CUDA driver replaced by a recording one.

``tile.ir.gpu.testing.RecordingDriver`` serves CPU torch tensors as the device's and records
every call that reaches it, so these tests say exactly what a launch asks of the driver:
which stream (torch's current one), which pointers, how often a module is loaded or a TMA
descriptor encoded, and that a repeated call does nothing that CUDA-graph capture forbids.
The same checks on a real GPU are in ``test_cuda_launch_gpu.py`` (marked ``gpu``).
"""

from __future__ import annotations

import ctypes
import gc
import os
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tile.backends.cuda._src.runtime import CudaFunction, CudaKernel  # noqa: E402
from tile.backends.cuda._src.tma import plan_boxes, plan_to_json  # noqa: E402
from tile.backends.cuda.errors import CudaLaunchError  # noqa: E402
from tile.ir.errors import SourceLocation  # noqa: E402
from tile.ir.gpu import KernelParam, LaunchRecipe  # noqa: E402
from tile.ir.gpu.launcher import GpuDriver  # noqa: E402
from tile.ir.gpu.testing import RecordingDriver  # noqa: E402


def aligned(shape: tuple[int, ...], dtype: Any = None, align: int = 256) -> Any:
    """A CPU tensor whose data starts on an ``align``-byte boundary (TMA needs 128)."""
    dtype = dtype or torch.float16
    count = 1
    for d in shape:
        count *= d
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.zeros(count + align // size, dtype=dtype)
    offset = (-raw.data_ptr() % align) // size
    return raw[offset : offset + count].view(shape)


def scale_kernel(
    driver: GpuDriver, location: SourceLocation | None = None, grid_y: int = 1, shared: int = 0
) -> CudaKernel:
    """``Y[i] = X[i] * s`` over a symbolic length M: one block of 64 threads per 64 elements
    (``grid_y`` rows of them, ``shared`` bytes of dynamic shared memory)."""
    recipe = LaunchRecipe(
        "scale",
        (KernelParam("tensor", "X", "float32"), KernelParam("tensor", "Y", "float32"),
         KernelParam("scalar", "s", "float32"), KernelParam("scalar", "M", "int32")),
        ("((M + 63) // 64)", str(grid_y), "1"), ("64", "1", "1"), str(shared),
    )  # fmt: skip
    params = [("X", "float32", ("M",)), ("Y", "float32", ("M",)), ("s", "float32", None)]
    return CudaKernel(b"cubin", recipe, params, location=location, driver=driver)


def tma_kernel(driver: RecordingDriver) -> CudaKernel:
    """A kernel that loads A (256 x 64 fp16) through TMA boxes of 128 x 32, swizzled 64 bytes."""
    plan = plan_to_json(plan_boxes(128, 32, "float16", 64))
    recipe = LaunchRecipe(
        "tma_copy",
        (KernelParam("tensor", "B", "float16"), KernelParam("tensormap", "A", "float16", tma=plan)),
        ("2", "2", "1"), ("128", "1", "1"), "16384",
    )  # fmt: skip
    return CudaKernel(
        b"cubin", recipe, [("A", "float16", (256, 64)), ("B", "float16", (256, 64))], driver=driver
    )


def test_launch_goes_on_torchs_current_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = RecordingDriver()
    driver.stream = None  # ask torch, as the real driver does
    current = {"handle": 0xA11CE}
    monkeypatch.setattr(
        torch._C, "_cuda_getCurrentRawStream", lambda device: current["handle"], raising=False
    )
    kernel = scale_kernel(driver)
    x, y = torch.ones(100), torch.empty(100)
    kernel(x, y, 2.0)
    current["handle"] = 0xB0B  # `with torch.cuda.stream(side):` makes another stream current
    kernel(x, y, 2.0)
    assert [launch.stream for launch in driver.launches()] == [0xA11CE, 0xB0B]
    # torch without the raw accessor: the handle of torch.cuda.current_stream(device)
    monkeypatch.delattr(torch._C, "_cuda_getCurrentRawStream", raising=False)

    class FakeStream:
        cuda_stream = 0xC0FFEE

    asked: list[int] = []
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: asked.append(device) or FakeStream())
    kernel(x, y, 2.0)
    assert driver.launches()[-1].stream == 0xC0FFEE and asked == [0]
    # a real driver resolves torch's accessor once, then asks it per launch
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0xD00D + device, raising=False)
    real = GpuDriver()
    assert [real.current_stream(0), real.current_stream(1)] == [0xD00D, 0xD00E]


def test_two_argument_signatures_in_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = RecordingDriver()
    kernel = scale_kernel(driver)
    checks: list[int] = []
    full_check = kernel.check_arguments
    monkeypatch.setattr(kernel, "check_arguments", lambda args: checks.append(1) or full_check(args))
    small, large = (torch.ones(100), torch.empty(100)), (torch.ones(1000), torch.empty(1000))
    kernel(*small, 2.0)
    kernel(*large, 3.0)
    kernel(*small, 4.0)
    kernel(*large, 5.0)
    launches = driver.launches()
    assert [launch.grid for launch in launches] == [(2, 1, 1), (16, 1, 1), (2, 1, 1), (16, 1, 1)]
    # the words: X's and Y's addresses, s as a float32, M as an int32
    for launch, (x, y), s in zip(launches, [small, large, small, large], [2.0, 3.0, 4.0, 5.0], strict=True):
        assert launch.words[:2] == (x.data_ptr(), y.data_ptr())
        assert ctypes.c_float.from_buffer_copy(launch.words[2].to_bytes(8, "little")).value == s
        assert launch.words[3] & 0xFFFFFFFF == x.numel()
    assert len(checks) == 2  # the full check once per signature, not per call
    assert driver.names().count("load") == 1  # the module once per device
    with pytest.raises(CudaLaunchError, match="argument Y has shape"):
        kernel(torch.ones(100), torch.empty(99), 1.0)  # a new signature is fully checked


def test_a_new_data_pointer_encodes_its_tma_descriptor_exactly_once() -> None:
    driver = RecordingDriver()
    kernel = tma_kernel(driver)
    a1, a2, b = aligned((256, 64)), aligned((256, 64)), aligned((256, 64))

    def encodes() -> list[int]:
        return [c[1].global_address for c in driver.calls if c[0] == "encode_tensor_map"]

    kernel(a1, b)
    kernel(a1, b)
    assert encodes() == [a1.data_ptr()]
    kernel(a2, b)
    kernel(a2, b)
    kernel(a1, b)  # still cached
    assert encodes() == [a1.data_ptr(), a2.data_ptr()]
    args = next(c[1] for c in driver.calls if c[0] == "encode_tensor_map")
    assert args.global_dim == (64, 256) and args.global_strides == (128,) and args.box_dim == (32, 128)
    # the map is passed by value: the parameter's bytes are the encoded map (first word: the address)
    assert [launch.words[1] for launch in driver.launches()] == [a1.data_ptr()] * 2 + [a2.data_ptr()] * 2 + [
        a1.data_ptr()
    ]
    assert ("set_dynamic_shared", 0, 16384) in driver.calls


def test_a_plan_keeps_its_tma_map_alive_when_the_descriptor_cache_drops_it() -> None:
    driver = RecordingDriver()
    kernel = tma_kernel(driver)
    a, b = aligned((256, 64)), aligned((256, 64))
    kernel(a, b)
    (plan,) = kernel._plans.values()
    slot = plan.by_value[0][1]
    owner, address = plan.holders[slot], plan.array[slot]
    next(iter(kernel._tensor_maps.values()))._maps.clear()  # the cache forgets the map ...
    gc.collect()
    kernel(a, b)  # ... and the plan, which still points at it, launches with it (no new encode)
    assert ctypes.addressof(owner) <= address < ctypes.addressof(owner) + ctypes.sizeof(owner)
    assert plan.holders[slot] is owner
    assert [launch.words[1] for launch in driver.launches()] == [a.data_ptr()] * 2
    assert [c[0] for c in driver.calls].count("encode_tensor_map") == 1


def test_a_launch_error_is_typed_and_names_the_kernel_and_its_line() -> None:
    driver = RecordingDriver()
    driver.launch_status = 701
    where = SourceLocation(__file__, 42, 4, "    def scale(X, Y, s):")
    kernel = scale_kernel(driver, where)
    with pytest.raises(CudaLaunchError) as caught:
        kernel(torch.ones(100), torch.empty(100), 1.0)
    error = caught.value
    assert "kernel scale" in str(error) and "RECORDED_ERROR_701" in str(error)
    assert "grid (2, 1, 1), block (64, 1, 1)" in str(error)
    assert error.location == where


def test_a_repeated_call_does_nothing_graph_capture_forbids(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = RecordingDriver()
    kernel = tma_kernel(driver)
    a, b = aligned((256, 64)), aligned((256, 64))
    kernel(a, b)  # warm-up: load, shared-memory opt-in, descriptor (as before a capture)
    assert driver.names() == ["load", "set_dynamic_shared", "encode_tensor_map", "current_stream", "launch"]
    driver.calls.clear()

    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("called during a launch that could be under graph capture")

    monkeypatch.setattr(ctypes, "CDLL", forbidden)  # no driver probe or dlopen per call
    monkeypatch.setattr(torch.cuda, "synchronize", forbidden)
    monkeypatch.setattr(torch.cuda, "is_available", forbidden)
    for _ in range(3):
        kernel(a, b)
    assert driver.names() == ["current_stream", "launch"] * 3


class FakeContextLib:
    """``cuCtxGetCurrent``/``cuCtxSetCurrent``/``cuLaunchKernel`` over a thread's current context."""

    def __init__(self, current: int | None) -> None:
        self.current = current
        self.calls: list[tuple[Any, ...]] = []

    def cuCtxGetCurrent(self, ref: Any) -> int:
        self.calls.append(("get",))
        ref._obj.value = self.current
        return 0

    def cuCtxSetCurrent(self, ctx: Any) -> int:
        self.calls.append(("set", ctx))
        self.current = ctx
        return 0

    def cuLaunchKernel(self, *args: Any) -> int:
        self.calls.append(("launch", self.current))
        return 0


@pytest.mark.parametrize("current", [7, 9, None])
def test_a_launch_runs_in_its_devices_context_and_restores_the_callers(current: int | None) -> None:
    lib = FakeContextLib(current)
    function = CudaFunction(lib, context=7, function=3, static_shared=0, fail=lambda m, h: RuntimeError(m))
    assert function.launch((1, 1, 1), (32, 1, 1), 0, 0, 0) == 0
    assert ("launch", 7) in lib.calls and lib.current == current
    if current == 7:  # already current: nothing but the query and the launch
        assert lib.calls == [("get",), ("launch", 7)]


@pytest.fixture(scope="module")
def compiled_add(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The 256x256 fp32 add of ``test_cuda_compile`` built for sm_80 (under TILE_DEVICE=emu no
    nvcc is needed: the recipe and parameters are all a host-side launch reads)."""
    from test_cuda_compile import elementwise_kernel

    import tile.lang as tilelang

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        patch.setenv("TILE_DEVICE", "emu")
        target = {"kind": "cuda", "arch": "sm_80"}
        return tilelang.compile(elementwise_kernel(256, 256), out_idx=[-1], target=target)


def _jit(compiled: Any, driver: RecordingDriver) -> Any:
    from tile.lang._src.jit import JITKernel

    binary = compiled.artifact.payload
    launcher = CudaKernel(binary.cubin, binary.recipe, binary.params, driver=driver)
    return JITKernel(compiled.func, compiled.artifact, launcher, compiled.out_idx)


def test_jit_kernel_calls_take_the_fast_path_with_outputs_from_torch(
    compiled_add: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = RecordingDriver()
    jit = _jit(compiled_add, driver)
    a, b = aligned((256, 256), torch.float32), aligned((256, 256), torch.float32)
    out = jit(a, b)
    assert isinstance(out, torch.Tensor) and out.shape == (256, 256) and out.dtype == torch.float32
    full_checks: list[int] = []
    checked = jit._call_checked
    monkeypatch.setattr(jit, "_call_checked", lambda args: full_checks.append(1) or checked(args))
    driver.calls.clear()
    outs = [jit(a, b) for _ in range(3)]
    assert not full_checks  # the signature was seen: one cheap check, no full one
    assert driver.names() == ["current_stream", "launch"] * 3
    for launch, c in zip(driver.launches(), outs, strict=True):
        assert launch.words == (a.data_ptr(), b.data_ptr(), c.data_ptr())  # outputs fresh from torch
        assert launch.grid == (4, 4, 1) and launch.block == (128, 1, 1)
    # an input off the alignment the kernel assumes goes the full way, and is staged there
    raw = aligned((256 * 256 + 1,), torch.float32)
    shifted = raw[1:].view(256, 256)
    jit(shifted, b)
    assert full_checks == [1]
    staged = driver.launches()[-1].words[0]
    assert staged != shifted.data_ptr() and staged % 64 == 0


def test_a_driver_error_through_jit_names_the_users_kernel_line(compiled_add: Any) -> None:
    driver = RecordingDriver()
    jit = _jit(compiled_add, driver)
    a = aligned((256, 256), torch.float32)
    jit(a, a)
    driver.launch_status = 719
    with pytest.raises(CudaLaunchError, match="RECORDED_ERROR_719") as caught:
        jit(a, a)  # on the fast path
    import inspect

    from tile.testsupport import kernels

    lines, first = inspect.getsourcelines(kernels.staged_add)  # test_cuda_compile's elementwise_kernel
    kernel_line = first + next(i for i, line in enumerate(lines) if "@T.prim_func" in line)
    location = caught.value.location
    assert location is not None and os.path.samefile(location.filename, kernels.__file__)
    assert location.line == kernel_line  # where the user's kernel is defined


def test_bound_calls_allocate_outputs_anywhere_in_the_parameter_list() -> None:
    """``bind_call`` with an output before a scalar (``out_idx=[1]``): a miss until a full call
    has planned the signature, then the output comes from torch, in its place."""
    miss = object()
    driver = RecordingDriver()
    kernel = scale_kernel(driver)
    call = kernel.bind_call([1], None, 16, miss)
    x = torch.ones(100)
    assert call((x, 2.0)) is miss  # nothing planned yet: JITKernel would check fully
    kernel(x, torch.empty(100), 2.0)  # what JITKernel's full path does after its checks
    out = call((x, 3.0))
    assert isinstance(out, torch.Tensor) and out.shape == (100,) and out.dtype == torch.float32
    launch = driver.launches()[-1]
    assert launch.words[:2] == (x.data_ptr(), out.data_ptr())
    assert ctypes.c_float.from_buffer_copy(launch.words[2].to_bytes(8, "little")).value == 3.0
    assert call((torch.ones(100, dtype=torch.float64), 3.0)) is miss  # another dtype: another signature
    assert call((x, "3")) is miss  # another scalar type
    assert call((x,)) is miss


def test_the_last_calls_signature_is_matched_field_by_field() -> None:
    """A call is first checked against the last call's signature, in place (no key hashed);
    every field still counts: dtype, shape, contiguity, tensor type, scalar type and the
    value of a scalar the launch dims read."""
    miss = object()
    driver = RecordingDriver()
    kernel = scale_kernel(driver)
    call = kernel.bind_call([1], None, 16, miss)
    x, x2 = torch.ones(128), torch.ones(64)
    kernel(x, torch.empty(128), 2.0)
    kernel(x2, torch.empty(64), 2.0)
    for _ in range(2):  # alternating signatures each find their own plan
        assert call((x, 1.0)).shape == (128,) and driver.launches()[-1].grid == (2, 1, 1)
        assert call((x2, 1.0)).shape == (64,) and driver.launches()[-1].grid == (1, 1, 1)
    assert call((torch.ones(128, dtype=torch.float64), 1.0)) is miss  # another dtype
    assert call((torch.ones(256)[::2], 1.0)) is miss  # 128 elements, not contiguous
    assert call((x, 1)) is miss  # an int where the plans saw a float
    assert call((x, 1.0, 2.0)) is miss and call((x,)) is miss
    assert call((torch.nn.Parameter(x, requires_grad=False), 1.0)).shape == (128,)  # a subclass: hashed

    # a scalar the grid reads is part of the signature by value
    recipe = LaunchRecipe(
        "blocks", (KernelParam("tensor", "Y", "float32"), KernelParam("scalar", "n", "int32")),
        ("((n + 63) // 64)", "1", "1"), ("64", "1", "1"), "0",
    )  # fmt: skip
    blocks = CudaKernel(b"cubin", recipe, [("Y", "float32", (256,)), ("n", "int32", None)], driver=driver)
    bound = blocks.bind_call([0], None, 16, miss)
    blocks(torch.empty(256), 128)
    blocks(torch.empty(256), 256)
    grids = []
    for n in (128, 256, 256, 128):
        assert bound((n,)).shape == (256,)
        grids.append(driver.launches()[-1].grid[0])
    assert grids == [2, 4, 4, 2]
    assert bound((64,)) is miss  # a value no full call has planned
