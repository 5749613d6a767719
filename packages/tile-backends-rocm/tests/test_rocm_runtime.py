"""Launching without a ROCm device: a typed error, never a crash; arguments are checked first."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from tile.backends.rocm import RocmDeviceUnavailableError, RocmLaunchError
from tile.backends.rocm._src.runtime import HipKernel, hip_probe
from tile.ir.gpu import KernelParam, LaunchRecipe

RECIPE = LaunchRecipe("k", (KernelParam("tensor", "X", "float16"),), ("1", "1", "1"), ("64", "1", "1"), "0")


def test_rocm_launch_without_a_device_is_a_typed_error() -> None:
    if hip_probe():
        pytest.skip("a ROCm device is present")
    kernel = HipKernel(b"\x7fELF", RECIPE, [("X", "float16", (4,))])
    with pytest.raises(RocmDeviceUnavailableError, match="TILE_DEVICE=emu"):
        kernel(np.zeros(4, np.float16))


def test_rocm_argument_checks_name_the_problem() -> None:
    torch = pytest.importorskip("torch")
    kernel = HipKernel(b"\x7fELF", RECIPE, [("X", "float16", (4,))])
    with pytest.raises(RocmLaunchError, match="runs on a ROCm device"):
        kernel.check_arguments([torch.zeros(4, dtype=torch.float16)])
    with pytest.raises(RocmLaunchError, match="expected 1 arguments, got 2"):
        kernel.check_arguments([1, 2])


def test_rocm_launches_share_the_plan_path_on_torchs_stream() -> None:
    """With the HIP runtime replaced by a recording driver: one full check per argument
    signature, the launch on the stream torch reports, a driver error typed and named."""
    torch = pytest.importorskip("torch")
    from tile.ir.gpu.testing import RecordingDriver

    recipe = LaunchRecipe(
        "k", (KernelParam("tensor", "X", "float16"), KernelParam("scalar", "N", "int32")),
        ("((N + 255) // 256)", "1", "1"), ("256", "1", "1"), "0",
    )  # fmt: skip
    driver = RecordingDriver()
    driver.stream = 0xF00D
    kernel = HipKernel(b"\x7fELF", recipe, [("X", "float16", ("N",))], driver=driver)
    x, y = torch.zeros(1000, dtype=torch.float16), torch.zeros(100, dtype=torch.float16)
    for value in (x, y, x):
        kernel(value)
    launches = driver.launches()
    assert [launch.grid for launch in launches] == [(4, 1, 1), (1, 1, 1), (4, 1, 1)]
    assert {launch.stream for launch in launches} == {0xF00D}
    assert [launch.words[0] for launch in launches] == [x.data_ptr(), y.data_ptr(), x.data_ptr()]
    assert driver.names().count("load") == 1
    driver.launch_status = 98
    with pytest.raises(RocmLaunchError, match=r"RECORDED_ERROR_98 .*\(kernel k\)"):
        kernel(x)


class _FakeHip:
    """``hipGetDevice``/``hipSetDevice``/``hipModuleLaunchKernel`` over a thread's current device."""

    def __init__(self, current: int) -> None:
        self.current = current
        self.launched_on: list[int] = []

    def hipGetDevice(self, ref: object) -> int:
        ref._obj.value = self.current  # type: ignore[attr-defined]
        return 0

    def hipSetDevice(self, device: int) -> int:
        self.current = device
        return 0

    def hipModuleLaunchKernel(self, *args: object) -> int:
        self.launched_on.append(self.current)
        return 0


@pytest.mark.parametrize("current", [0, 1])
def test_rocm_launch_selects_the_kernels_device_and_restores_the_callers(current: int) -> None:
    from tile.backends.rocm._src.runtime import HipFunction

    lib = _FakeHip(current)
    function = HipFunction(lib, device=1, module=5, function=6, image=b"")
    assert function.launch((1, 1, 1), (64, 1, 1), 0, 0, 0) == 0
    assert lib.launched_on == [1] and lib.current == current


HIP_HEADER = pathlib.Path("/opt/rocm/include/hip/hip_runtime_api.h")
if not HIP_HEADER.is_file():
    HIP_HEADER = pathlib.Path("/usr/include/hip/hip_runtime_api.h")


@pytest.mark.skipif(not HIP_HEADER.is_file(), reason="no hip_runtime_api.h here")
def test_rocm_prototypes_match_the_hip_header() -> None:
    """Each ctypes prototype of the launcher against its declaration in hip_runtime_api.h: as
    many parameters, pointers and handles as addresses, ``unsigned int`` as ``c_uint``."""
    import ctypes
    import re

    from tile.backends.rocm._src.runtime import PROTOTYPES

    text = HIP_HEADER.read_text(errors="replace")
    for name, argtypes in PROTOTYPES.items():
        found = re.search(rf"hipError_t\s+{name}\s*\(([^;]*?)\)\s*;", text)
        assert found, name
        declared = [" ".join(p.split()) for p in found.group(1).split(",")]
        assert len(declared) == len(argtypes), (name, declared)
        for c_type, py_type in zip(declared, argtypes, strict=True):
            if c_type.startswith("const char*"):
                want = {ctypes.c_char_p}
            elif "*" in c_type:
                base = c_type.replace("const ", "").split("*")[0].strip()
                handle = ctypes.c_void_p
                pointee = {"int": ctypes.c_int, "hipModule_t": handle, "hipFunction_t": handle}
                want = {ctypes.c_void_p} | ({ctypes.POINTER(pointee[base])} if base in pointee else set())
            elif c_type.split()[0] in ("hipFunction_t", "hipModule_t", "hipStream_t"):
                want = {ctypes.c_void_p}
            elif c_type.startswith("unsigned int"):
                want = {ctypes.c_uint}
            else:
                assert c_type.startswith("int "), (name, c_type)
                want = {ctypes.c_int}
            assert py_type in want, (name, c_type, py_type)
