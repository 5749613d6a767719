"""``TILE_CHECK=1`` is the one checking switch: the emulator builds checked kernels under it,
as under its older name ``TILE_EMU_CHECK`` (issue 17)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _cpu_simt_support import CUDA, needs_cxx
from test_cpu_simt_checks import SOURCE

from tile.backends.cpu.simt import SimtKernel, SimtMisuseError, kernel_library

pytestmark = needs_cxx


@pytest.mark.parametrize("switch", ["TILE_CHECK", "TILE_EMU_CHECK"])
def test_either_switch_builds_emulated_kernels_with_access_checks(monkeypatch, switch):
    monkeypatch.delenv("TILE_CHECK", raising=False)
    monkeypatch.delenv("TILE_EMU_CHECK", raising=False)
    out = np.zeros(64, np.float32)
    args = [ctypes.c_void_p(out.ctypes.data), ctypes.c_int32(4)]
    def run() -> None:
        kernel = SimtKernel(kernel_library(SOURCE, "shared_overrun", CUDA), device=CUDA)
        kernel.launch((1, 1, 1), (64, 1, 1), 256, args)

    run()  # unseen
    monkeypatch.setenv(switch, "1")
    with pytest.raises(SimtMisuseError, match="out-of-bounds shared memory write"):
        run()
