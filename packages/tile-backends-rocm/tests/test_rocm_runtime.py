"""Launching without a ROCm device: a typed error, never a crash; arguments are checked first."""

from __future__ import annotations

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
