"""``T.StridedTensor`` parameters on CUDA targets, run on the emulator against numpy.

A strided parameter takes a view as it is (a sliced column range, every other row, a
transposed matrix): the launcher checks constant strides, binds symbolic ones (a scalar the
kernel reads), and a plan is per stride signature. The copies read through the strides: a
vector load or ``cp.async`` only where the row stride proves the alignment, a TMA map only
for constant strides a map can describe (sm_90a), else ``cp.async``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import tvm
from _cuda_lowering import lowered

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda._src import backend
from tile.backends.cuda._src.runtime import CudaKernel
from tile.backends.cuda._src.tma import plan_boxes, plan_to_json
from tile.backends.cuda.errors import CudaLaunchError
from tile.ir.gpu import KernelParam, LaunchRecipe
from tile.ir.gpu.testing import RecordingDriver
from tile.ir.target import Target
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]
torch = pytest.importorskip("torch")
RNG = np.random.default_rng(2883)


def tile_copy(s0: Any, s1: Any) -> Any:
    """``B = A`` for a 32 x 64 float16 ``A`` of strides ``(s0, s1)``, through a shared tile."""

    @T.prim_func
    def main(A: T.StridedTensor((32, 64), (s0, s1), "float16"), B: T.Tensor((32, 64), "float16")):
        with T.Kernel(2, 2, threads=64) as (bx, by):
            S = T.alloc_shared((16, 32), "float16")
            T.copy(A[by * 16, bx * 32], S)
            T.copy(S, B[by * 16, bx * 32])

    return main


def test_views_of_any_strides_through_one_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")  # the emulator's run is the check; no nvcc
    kernel = tilelang.compile(tile_copy(T.dynamic("s0"), T.dynamic("s1")), out_idx=[1], target="cuda")
    store = torch.from_numpy(RNG.standard_normal((64, 72)).astype("float16"))
    views = {
        "columns 3..66": store[:32, 3:67],  # strides (72, 1), offset 3: no vector load is aligned
        "every other row": store[::2, :64],  # strides (144, 1)
        "transposed": store[:64, :32].t(),  # strides (1, 72)
    }
    for name, view in views.items():
        assert not view.is_contiguous(), name
        np.testing.assert_array_equal(np.asarray(kernel(view)), view.numpy(), err_msg=name)
    base = store.numpy()
    np.testing.assert_array_equal(kernel(base[:32, 5:69]), base[:32, 5:69])  # a numpy view


def row_scale(stride: Any) -> Any:
    @T.prim_func
    def scale(A: T.StridedTensor((64, 64), (stride, 1), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(64, threads=1) as bx:
            for j in T.Parallel(4):
                B[bx, j] = A[bx, j] * 2

    return scale


@pytest.mark.parametrize(("stride", "width"), [(66, 2), ("s", 1)])
def test_vector_loads_only_where_the_row_stride_aligns_them(
    stride: Any, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of 66 floats start 8-byte aligned: float2 loads, not float4 (the shape's 64 would
    allow them, a fault on a GPU); a symbolic row stride proves nothing: scalar loads."""
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")  # the source is what is checked
    stride = T.dynamic(stride) if isinstance(stride, str) else stride
    source = cuda_source(row_scale(stride), "sm_80")
    loads = set(re.findall(r"\*\(float(\d)\*\)\(A_ptr", source))
    assert loads == ({str(width)} if width > 1 else set()), source


@T.prim_func
def column_copy(
    A: T.StridedTensor((8, 64), (1, 66), "float32"), B: T.StridedTensor((8, 64), (1, 66), "float32")
):
    with T.Kernel(1, threads=64):
        col = T.get_thread_binding(0)
        for row in T.vectorized(8):  # down a column: contiguous, each column 66 floats on
            B[row, col] = A[row, col]


def test_a_vectorized_loop_over_a_strided_view_is_cut_to_its_alignment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight floats of a column start 8-byte aligned (66 * 4 bytes apart): float2 pieces, where
    the 128-bit cut alone made float4 accesses that fault on odd columns."""
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    source = cuda_source(column_copy, "sm_80")
    assert set(re.findall(r"\*\(float(\d)\*\)\([AB]_ptr", source)) == {"2"}, source


def cuda_source(func: Any, arch: str) -> str:
    """The CUDA source the backend generates for ``func`` (no cubin, no emulator build)."""
    target = Target(kind="cuda", arch=arch)
    mod = tvm.IRModule({"main": lowered(func, arch)})
    return str(backend.build(mod, target).sources["cuda"])


# ---------------------------------------------------------------- the launcher (a recording driver)


def recorded_kernel(driver: RecordingDriver, strides: tuple[Any, ...], tma: bool = False) -> CudaKernel:
    """A launcher of ``X`` (4 x 8 float16, declared ``strides``), ``Y`` and, where ``X``'s row stride
    is the symbolic ``ld``, that stride."""
    box = plan_to_json(plan_boxes(4, 8, "float16", 0))
    x = KernelParam("tensormap", "X", "float16", tma=box) if tma else KernelParam("tensor", "X", "float16")
    ld = (KernelParam("scalar", "ld", "int32"),) if strides[0] == "ld" else ()  # a symbolic stride
    recipe = LaunchRecipe(
        "k", (x, KernelParam("tensor", "Y", "float16"), *ld), ("1", "1", "1"), ("32", "1", "1"), "0"
    )
    params = [("X", "float16", (4, 8)), ("Y", "float16", (4, 8))]
    return CudaKernel(b"cubin", recipe, params, driver=driver, strides={"X": strides})


def test_a_symbolic_stride_is_passed_and_keys_the_plan() -> None:
    driver = RecordingDriver(device_type="cpu")
    kernel = recorded_kernel(driver, ("ld", 1))
    y = torch.zeros(4, 8, dtype=torch.float16)
    narrow, wide = torch.zeros(4, 24, dtype=torch.float16), torch.zeros(4, 40, dtype=torch.float16)
    kernel(narrow[:, 8:16], y)
    kernel(wide[:, :8], y)
    kernel(narrow[:, :8], y)  # the first plan again
    assert [launch.words[2] for launch in driver.launches()] == [24, 40, 24]
    assert driver.launches()[0].words[0] == narrow[:, 8:16].data_ptr()
    with pytest.raises(CudaLaunchError, match=r"element strides \[1, 4\], the kernel declares \['ld', 1\]"):
        kernel(torch.zeros(8, 4, dtype=torch.float16).t(), y)  # a transposed view: column stride 4


def test_a_tma_map_of_a_strided_tensor_has_its_strides() -> None:
    driver = RecordingDriver(device_type="cpu")
    kernel = recorded_kernel(driver, (16, 1), tma=True)
    store = torch.zeros(4 + 4, 16, dtype=torch.float16)[:4]  # rows of 32 bytes, 8 used
    kernel(store[:, :8], torch.zeros(4, 8, dtype=torch.float16))
    maps = [c[1] for c in driver.calls if c[0] == "encode_tensor_map"]
    assert [m.global_strides for m in maps] == [(32,)]  # bytes between rows: the view's, not 16
    with pytest.raises(CudaLaunchError, match=r"element strides \[8, 1\], the kernel declares \[16, 1\]"):
        kernel(torch.zeros(4, 8, dtype=torch.float16), torch.zeros(4, 8, dtype=torch.float16))


@pytest.mark.parametrize(
    ("strides", "expressible"),
    [(None, True), ((136, 1), True), ((130, 1), False), (("s", 1), False), ((1, 136), False)],
)
def test_a_tma_map_only_for_strides_it_can_describe(strides: Any, expressible: bool) -> None:
    """sm_90a's TMA tiles: constant strides, the last 1, the others 16-byte multiples (136 halfs:
    272 bytes); 130 halfs (260 bytes), a symbolic or a transposed stride keep cp.async."""
    from tile.backends.cuda._src.sm90a_mark_tma_copies import _map_strides_expressible

    var = tvm.tirx.Var
    steps = None if strides is None else [var(s, "int32") if isinstance(s, str) else s for s in strides]
    buffer = tvm.tirx.decl_buffer((64, 128), "float16", "A", strides=steps)
    assert _map_strides_expressible(buffer) is expressible
