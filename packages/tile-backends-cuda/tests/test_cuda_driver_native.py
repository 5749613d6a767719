"""The real ctypes path of the CUDA launcher against a C stand-in for libcuda.

``native/fake_libcuda.cpp`` exports the driver entry points the launcher calls and records
what it receives. Built with the host compiler and loaded with ctypes exactly as ``libcuda``
is, it checks what no Python fake can: that the prototypes marshal grid, block, stream,
handles and the kernel-parameter array as C receives them, that a launch runs in the
device's primary context and gives the caller's back, and that a driver error is named.
"""

from __future__ import annotations

import ctypes
import gc
import struct
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from _fake_libcuda import build_fake_libcuda, two_outputs_kernel  # noqa: E402
from test_cuda_launch_plan import scale_kernel  # noqa: E402

from tile.backends.cuda._src.runtime import CudaDriver, CudaKernel  # noqa: E402
from tile.backends.cuda.errors import CudaLaunchError  # noqa: E402
from tile.ir.gpu.launcher import ScopedFunction  # noqa: E402


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> Any:
    lib = build_fake_libcuda(tmp_path_factory.mktemp("fake-driver"))
    if lib is None:
        pytest.skip("no host C++ compiler")
    return lib


def _kernel(lib: Any) -> CudaKernel:
    driver = CudaDriver(lib)
    driver.device_type = "cpu"  # CPU tensors stand in for the device's
    driver.current_stream = lambda device: 0xABCDEF012345  # type: ignore[method-assign]
    return scale_kernel(driver, grid_y=2, shared=65536)


def _last_launch(lib: Any) -> list[int]:
    out = (ctypes.c_uint64 * 16)()
    lib.fake_last_launch(out)
    return list(out)


def test_ctypes_marshals_a_launch_as_c_receives_it(libcuda: Any) -> None:
    kernel = _kernel(libcuda)
    x, y = torch.ones(1000), torch.empty(1000)
    kernel(x, y, 2.5)
    assert libcuda.fake_loaded_image()[:4] == kernel.cubin[:4] and libcuda.fake_function_name() == b"scale"
    # 64 static bytes + 64 KiB dynamic exceed 48 KiB: the opt-in, with the dynamic size
    assert libcuda.fake_last_set_attribute() == 65536
    launch = _last_launch(libcuda)
    assert launch[:7] == [16, 2, 1, 64, 1, 1, 65536]
    assert launch[7] == 0xABCDEF012345  # the stream handle, all 64 bits
    assert launch[8] == 0x1000  # inside device 0's primary context ...
    assert libcuda.fake_current_context() is None  # ... and the caller's (none) is current again
    assert launch[9:11] == [x.data_ptr(), y.data_ptr()]
    assert struct.unpack("<f", struct.pack("<I", launch[11]))[0] == 2.5
    assert launch[12] == 1000
    libcuda.cuCtxSetCurrent(ctypes.c_void_p(0x1000))  # the device's context already current
    try:
        kernel(torch.ones(1000), torch.empty(1000), -1.0)
        assert libcuda.fake_current_context() == 0x1000
    finally:
        libcuda.cuCtxSetCurrent(None)
    assert libcuda.fake_launches() == 2
    assert struct.unpack("<f", struct.pack("<I", _last_launch(libcuda)[11]))[0] == -1.0
    assert _last_launch(libcuda)[8] == 0x1000


def test_a_driver_error_comes_back_named(libcuda: Any) -> None:
    kernel = _kernel(libcuda)
    libcuda.fake_set_launch_status(700)
    try:
        with pytest.raises(CudaLaunchError, match=r"CUDA_ERROR_FAKE .*\(kernel scale\)"):
            kernel(torch.ones(64), torch.empty(64), 1.0)
    finally:
        libcuda.fake_set_launch_status(0)


@pytest.fixture
def native_launch() -> Any:
    from tile.ir.gpu.native_launch import native_call_function

    function = native_call_function()
    if function is None:
        pytest.skip("the native launch path did not build (no host C++ compiler)")
    return function


STREAM = 0x5EED0000BEEF


def _env_stream_driver(lib: Any) -> CudaDriver:
    """A driver that answers, as torch's current stream, the stream tvm-ffi installs for a call
    (what it does for CUDA tensors, from torch's current stream; for these CPU stand-ins a test
    sets it with ``tvm_ffi.use_raw_stream``)."""
    import tvm_ffi

    cpu = tvm_ffi.device("cpu", 0)
    driver = CudaDriver(lib)
    driver.device_type = "cpu"
    driver.current_stream = lambda device: tvm_ffi.get_raw_stream(cpu)  # type: ignore[method-assign]
    return driver


def _env_stream_kernel(lib: Any, **options: Any) -> CudaKernel:
    """The scale kernel on ``_env_stream_driver``."""
    return scale_kernel(_env_stream_driver(lib), **options)


def _counting(binding: Any) -> list[Any]:
    """What the binding's native calls answer from now on: "launched", "miss" or a -status."""
    answers: list[Any] = []
    native = binding.native

    def count(*args: Any) -> Any:
        result = native(*args)
        answers.append({1: "miss"}.get(result, result) if isinstance(result, int) else "launched")
        return result

    binding.native = count
    return answers


def test_the_native_path_launches_what_the_python_path_launches(libcuda: Any, native_launch: Any) -> None:
    import tvm_ffi

    kernel = _env_stream_kernel(libcuda, grid_y=2, shared=65536)
    miss = object()
    call = kernel.bind_call([1], None, 16, miss)
    x = torch.ones(1000)
    with tvm_ffi.use_raw_stream(tvm_ffi.device("cpu", 0), STREAM):
        kernel(x, torch.empty(1000), 2.5)  # the full path plans the signature (JITKernel's miss path)
        python_launch = _last_launch(libcuda)
        answers = _counting(kernel._bindings[-1])
        launches = libcuda.fake_launches()
        for scale in (2.5, -1.0):
            out = call((x, scale))
            launch = _last_launch(libcuda)
            assert launch[:9] == python_launch[:9]  # grid, block, shared, stream, in the device's context
            assert launch[7] == STREAM  # the stream tvm-ffi installs for the call: torch's current one
            assert libcuda.fake_current_context() is None  # the caller's (none) is current again
            # the output: allocated by the native call, from the caller's (torch's) allocator
            assert isinstance(out, torch.Tensor) and out.shape == (1000,) and out.dtype == torch.float32
            assert launch[9:11] == [x.data_ptr(), out.data_ptr()]
            assert struct.unpack("<f", struct.pack("<I", launch[11]))[0] == scale
            assert launch[12] == 1000  # the symbolic length, fixed by the signature
    assert answers == ["launched", "launched"] and libcuda.fake_launches() == launches + 2
    assert len({out.data_ptr(), call((x, 1.0)).data_ptr()}) == 2  # a fresh output per call
    with tvm_ffi.use_raw_stream(tvm_ffi.device("cpu", 0), STREAM + 16):
        call((x, 1.0))
    assert _last_launch(libcuda)[7] == STREAM + 16  # asked per call, never cached
    launches += 1
    # what no plan describes is left to the Python path, which declines it too
    assert call((torch.ones(999), 1.0)) is miss
    assert call((x, 1)) is miss  # an int where the plan saw a float
    assert call((torch.ones(2000)[::2], 1.0)) is miss  # not contiguous
    assert call((x.double(), 1.0)) is miss  # another dtype
    assert call((x, object())) is miss  # tvm-ffi passes it as an opaque object: no plan's scalar
    assert answers[4:] == ["miss"] * 5 and libcuda.fake_launches() == launches + 3


def test_a_driver_whose_stream_is_not_the_one_tvm_ffi_installs_stays_on_the_python_path(
    libcuda: Any, native_launch: Any
) -> None:
    kernel = _kernel(libcuda)  # answers a fixed stream: the native call would launch elsewhere
    call = kernel.bind_call([1], None, 16, object())
    x = torch.ones(64)
    kernel(x, torch.empty(64), 1.0)
    assert kernel._bindings[-1].native is None
    out = call((x, 1.0))
    assert _last_launch(libcuda)[7] == 0xABCDEF012345 and _last_launch(libcuda)[10] == out.data_ptr()


def test_two_signatures_in_a_row_both_launch_natively(libcuda: Any, native_launch: Any) -> None:
    import tvm_ffi

    kernel = _env_stream_kernel(libcuda)
    call = kernel.bind_call([1], None, 16, object())
    short, long = torch.ones(64), torch.ones(1000)
    with tvm_ffi.use_raw_stream(tvm_ffi.device("cpu", 0), STREAM):
        kernel(short, torch.empty(64), 1.0)
        kernel(long, torch.empty(1000), 1.0)
        answers = _counting(kernel._bindings[-1])
        for x in (short, long, short, long):
            out = call((x, 3.0))
            launch = _last_launch(libcuda)
            assert launch[0] == (len(x) + 63) // 64 and launch[12] == len(x)  # that signature's plan
            assert launch[9:11] == [x.data_ptr(), out.data_ptr()] and out.shape == x.shape
    assert answers == ["launched"] * 4


def test_a_driver_error_on_the_native_path_is_typed_and_located(libcuda: Any, native_launch: Any) -> None:
    from tile.ir.errors import SourceLocation

    where = SourceLocation(__file__, 7, 4, "    def scale(X, Y, s):")
    kernel = _env_stream_kernel(libcuda)
    call = kernel.bind_call([1], where, 16, object())
    short, long = torch.ones(64), torch.ones(1000)
    kernel(short, torch.empty(64), 1.0)
    kernel(long, torch.empty(1000), 1.0)
    answers = _counting(kernel._bindings[-1])
    libcuda.fake_set_launch_status(700)
    try:
        with pytest.raises(CudaLaunchError, match=r"CUDA_ERROR_FAKE .*\(kernel scale\)") as caught:
            call((long, 1.0))
    finally:
        libcuda.fake_set_launch_status(0)
    assert answers == [-700]
    assert "grid (16, 1, 1)" in str(caught.value)  # the plan that failed, not another one
    assert caught.value.location == where


def test_tma_maps_are_encoded_once_per_pointer_then_launched_natively(
    libcuda: Any, native_launch: Any
) -> None:
    from test_cuda_launch_plan import aligned, tma_kernel

    from tile.ir.gpu.native_launch import MAPS
    from tile.ir.gpu.testing import RecordingDriver

    driver = CudaDriver(libcuda)
    driver.device_type = "cpu"
    driver.current_stream = lambda device: 0  # type: ignore[method-assign]
    recorder = RecordingDriver()
    driver.encode_tensor_map = recorder.encode_tensor_map  # type: ignore[method-assign]
    kernel = tma_kernel(driver)  # type: ignore[arg-type]
    call = kernel.bind_call([1], None, 16, object())
    a1, a2 = aligned((256, 64)), aligned((256, 64))
    more = [aligned((256, 64)) for _ in range(MAPS)]
    libcuda.fake_set_param_widths((ctypes.c_int * 2)(8, 8), 2)  # B's pointer, the map's first word
    try:
        kernel(a1, aligned((256, 64)))  # the full path plans the signature and encodes a1's map
        answers = _counting(kernel._bindings[-1])
        for a in (a1, a1, a2, a2, a1, a2, *[m for m in more for _ in range(2)], a1, a1):
            out = call((a,))
            assert _last_launch(libcuda)[9:11] == [out.data_ptr(), a.data_ptr()]  # B; the map names A
        # the descriptor cache drops every map: the native plan keeps the last MAPS alive itself
        next(iter(kernel._tensor_maps.values()))._maps.clear()
        gc.collect()
        for a in (*more[1:], a1):
            out = call((a,))
            assert _last_launch(libcuda)[9:11] == [out.data_ptr(), a.data_ptr()]
    finally:
        libcuda.fake_set_param_widths((ctypes.c_int * 4)(8, 8, 4, 4), 4)
    # a pointer without its map: the native call declines, the Python path encodes it (once per
    # pointer: a1's map comes from the descriptor cache) and the next call with it is native;
    # the native plan holds the last MAPS pointers' maps, so a1 comes back through Python once
    assert answers[:6] == ["launched", "launched", "miss", "launched", "launched", "launched"]
    assert answers[6:] == ["miss", "launched"] * (MAPS + 1) + ["launched"] * MAPS
    encodes = [c[1].global_address for c in recorder.calls if c[0] == "encode_tensor_map"]
    assert encodes == [a.data_ptr() for a in (a1, a2, *more)]


class _IndexScopedFunction(ScopedFunction):
    """A launch scope that is a device index, 4 bytes wide as HIP's, over the stand-in's
    ``hipGetDevice``/``hipSetDevice``/``hipModuleLaunchKernel``."""

    symbols = ("hipGetDevice", "hipSetDevice", "hipModuleLaunchKernel")
    scope_type = ctypes.c_int


class _IndexScopeDriver(CudaDriver):
    def load(self, image: bytes, kernel_name: str, device: int, **options: Any) -> Any:
        return _IndexScopedFunction(self.lib, 2, 0x3000)  # the kernel lives on device 2


def test_a_device_index_scope_is_selected_for_the_launch_and_given_back(
    libcuda: Any, native_launch: Any
) -> None:
    import tvm_ffi

    driver = _IndexScopeDriver(libcuda)
    driver.device_type = "cpu"
    cpu = tvm_ffi.device("cpu", 0)
    driver.current_stream = lambda device: tvm_ffi.get_raw_stream(cpu)  # type: ignore[method-assign]
    kernel = scale_kernel(driver)
    call = kernel.bind_call([1], None, 16, object())
    x = torch.ones(64)

    def current() -> int:
        device = ctypes.c_int()
        libcuda.hipGetDevice(ctypes.byref(device))
        return device.value

    assert current() == 7  # the stand-in's thread starts on device 7
    kernel(x, torch.empty(64), 1.0)  # the Python path
    assert _last_launch(libcuda)[8] == 2 and current() == 7
    answers = _counting(kernel._bindings[-1])
    out = call((x, 1.0))  # the native path: the same selection, the caller's device given back
    assert _last_launch(libcuda)[8] == 2 and current() == 7
    assert _last_launch(libcuda)[9:11] == [x.data_ptr(), out.data_ptr()]
    libcuda.hipSetDevice(2)  # already the kernel's device: launched as it is, left as it was
    try:
        call((x, 1.0))
        assert _last_launch(libcuda)[8] == 2 and current() == 2
    finally:
        libcuda.hipSetDevice(7)
    assert answers == ["launched", "launched"]


def test_two_outputs_anywhere_in_the_parameter_list_come_back_in_order(
    libcuda: Any, native_launch: Any
) -> None:
    kernel = two_outputs_kernel(_env_stream_driver(libcuda))
    call = kernel.bind_call([0, 2], None, 16, object())
    x = torch.ones(100)
    libcuda.fake_set_param_widths((ctypes.c_int * 4)(8, 8, 8, 4), 4)
    try:
        kernel(torch.empty(100), x, torch.empty(100, dtype=torch.float16))  # plans the signature
        answers = _counting(kernel._bindings[-1])
        y, z = call((x,))
        launch = _last_launch(libcuda)
        y2, z2 = call((x,))
    finally:
        libcuda.fake_set_param_widths((ctypes.c_int * 4)(8, 8, 4, 4), 4)
    assert answers == ["launched", "launched"]
    assert (y.dtype, y.shape, z.dtype, z.shape) == (torch.float32, (100,), torch.float16, (100,))
    assert launch[9:13] == [y.data_ptr(), x.data_ptr(), z.data_ptr(), 100]  # Y, X, Z, M in their slots
    assert len({y.data_ptr(), z.data_ptr(), y2.data_ptr(), z2.data_ptr()}) == 4


def test_threads_share_a_binding_without_a_lock(libcuda: Any, native_launch: Any) -> None:
    # each call packs its parameters on its own stack and keeps the GIL: nothing to race on
    import threading

    kernel = _env_stream_kernel(libcuda)
    call = kernel.bind_call([1], None, 16, object())
    inputs = [torch.ones(64), torch.ones(1000)]
    for x in inputs:
        kernel(x, torch.empty(len(x)), 1.0)
    answers = _counting(kernel._bindings[-1])
    launches = libcuda.fake_launches()
    wrong: list[Any] = []

    def work(x: Any) -> None:
        for _ in range(300):
            out = call((x, 2.0))
            if out.shape != x.shape:
                wrong.append(out.shape)

    threads = [threading.Thread(target=work, args=(x,)) for x in inputs for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong and answers == ["launched"] * 1200 and libcuda.fake_launches() == launches + 1200


class _OutputMapKernel(CudaKernel):
    """A kernel that writes its output C through a by-value map (as a TMA store would), packed
    by a recording packer: the map is 64 bytes whose first word is C's address."""

    def by_value_packer(self, param: Any, driver: Any) -> Any:
        encoded: list[int] = self.__dict__.setdefault("encoded", [])

        def pack(pointer: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[Any, int]:
            encoded.append(pointer)
            owner = (ctypes.c_uint64 * 8)(pointer)
            return owner, ctypes.addressof(owner)

        return pack


def test_an_output_written_through_a_map_stays_on_the_python_path(
    libcuda: Any, native_launch: Any
) -> None:
    # its map would need encoding for every fresh output: the Python path packs it per address
    from tile.ir.gpu import KernelParam, LaunchRecipe

    driver = _env_stream_driver(libcuda)
    recipe = LaunchRecipe(
        "map_store",
        (KernelParam("tensor", "A", "float32"), KernelParam("tensormap", "C", "float32")),
        ("1", "1", "1"), ("128", "1", "1"), "0",
    )  # fmt: skip
    params = [("A", "float32", (64,)), ("C", "float32", (64,))]
    kernel = _OutputMapKernel(b"cubin", recipe, params, driver=driver)
    call = kernel.bind_call([1], None, 16, object())
    a = torch.ones(64)
    libcuda.fake_set_param_widths((ctypes.c_int * 2)(8, 8), 2)  # A's pointer, the map's first word
    try:
        kernel(a, torch.empty(64))
        assert kernel._bindings[-1].native is None
        outs = [call((a,)) for _ in range(3)]
        last = _last_launch(libcuda)
    finally:
        libcuda.fake_set_param_widths((ctypes.c_int * 4)(8, 8, 4, 4), 4)
    assert last[9:11] == [a.data_ptr(), outs[-1].data_ptr()]  # the last output's own map
