"""The real ctypes path of the CUDA launcher against a C stand-in for libcuda.

``native/fake_libcuda.cpp`` exports the driver entry points the launcher calls and records
what it receives. Built with the host compiler and loaded with ctypes exactly as ``libcuda``
is, it checks what no Python fake can: that the prototypes marshal grid, block, stream,
handles and the kernel-parameter array as C receives them, that a launch runs in the
device's primary context and gives the caller's back, and that a driver error is named.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from _fake_libcuda import build_fake_libcuda  # noqa: E402
from test_cuda_launch_plan import scale_kernel  # noqa: E402

from tile.backends.cuda._src.runtime import CudaDriver, CudaKernel  # noqa: E402
from tile.backends.cuda.errors import CudaLaunchError  # noqa: E402


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
