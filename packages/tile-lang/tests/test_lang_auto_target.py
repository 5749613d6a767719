"""Target "auto": a kernel compiles for the device its tensors live on, at its first call."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tile.ir.backend as backend_api
import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.target import Target
from tile.lang._src import jit as jit_module
from tile.lang._src.auto_target import AutoTargetKernel, MixedDeviceError, device_of


@T.prim_func
def triple(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=32) as bx:
        for i in T.Parallel(32):
            B[bx * 32 + i] = A[bx * 32 + i] * 3.0


class FakeDeviceTensor:
    """Stands for a tensor in GPU memory: it says where it lives the DLPack way, as torch does."""

    def __init__(self, device_type: int, index: int = 0) -> None:
        self._device = (device_type, index)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


@pytest.fixture(autouse=True)
def _no_default_target(monkeypatch):
    monkeypatch.delenv("TILE_DEFAULT_TARGET", raising=False)


def test_host_arrays_compile_for_the_cpu():
    kernel = tilelang.compile(triple, out_idx=[-1])
    assert isinstance(kernel, AutoTargetKernel)
    a = np.arange(64, dtype="float32")
    np.testing.assert_array_equal(kernel(a), 3 * a)
    assert kernel.target.kind == "cpu"


def test_cpu_torch_tensors_compile_for_the_cpu():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(triple, out_idx=[-1])
    x = torch.arange(64, dtype=torch.float32)
    assert torch.equal(kernel(x), 3 * x)
    assert kernel.target.kind == "cpu"
    assert device_of(x) == (1, 0)


def _fake_gpu_backend(seen: list[tuple[int, int]]) -> backend_api.BackendManifest:
    cpu = backend_api.available_backends()["cpu"]

    def device_target(device_type: int, index: int) -> Target | None:
        seen.append((device_type, index))
        if device_type == 2:
            return Target(kind="fakegpu", arch=f"sm_9{index}")
        return None

    return dataclasses.replace(cpu, name="fakegpu", target_kinds=("fakegpu",), device_target=device_target)


@pytest.fixture
def fake_gpu(monkeypatch):
    """A backend that claims CUDA memory (DLPack type 2) and reports an arch per device index;
    compiling is recorded instead of run, so no GPU or nvcc is needed."""
    seen: list[tuple[int, int]] = []
    backends = backend_api.available_backends()
    backends["fakegpu"] = _fake_gpu_backend(seen)
    monkeypatch.setattr(backend_api, "_loaded", backends)
    built: list[tuple[str, str | None, str]] = []

    def record(func, outputs, resolved, manifest, options):
        built.append((resolved.kind, resolved.arch, manifest.name))
        return lambda *args: ("ran on", resolved.kind, resolved.arch)

    monkeypatch.setattr(jit_module, "_compile_for", record)
    return built


def test_gpu_tensors_compile_for_the_arch_of_their_device(fake_gpu):
    kernel = tilelang.compile(triple, out_idx=[-1])
    assert kernel(FakeDeviceTensor(2, 0)) == ("ran on", "fakegpu", "sm_90")
    assert kernel(FakeDeviceTensor(2, 0)) == ("ran on", "fakegpu", "sm_90")
    assert kernel(FakeDeviceTensor(2, 1)) == ("ran on", "fakegpu", "sm_91")
    assert fake_gpu == [("fakegpu", "sm_90", "fakegpu"), ("fakegpu", "sm_91", "fakegpu")]  # once per device
    assert kernel(np.zeros(64, "float32"))[:2] == ("ran on", "cpu")


def test_explicit_target_and_default_target_win(fake_gpu, monkeypatch):
    kernel = tilelang.compile(triple, out_idx=[-1], target="cpu")
    assert not isinstance(kernel, AutoTargetKernel)
    assert [(kind, name) for kind, _, name in fake_gpu] == [("cpu", "cpu")]
    monkeypatch.setenv("TILE_DEFAULT_TARGET", "cpu")
    kernel = tilelang.compile(triple, out_idx=[-1])
    assert kernel(FakeDeviceTensor(2, 0))[:2] == ("ran on", "cpu")


def test_jit_factories_follow_the_tensors_too(fake_gpu):
    @tilelang.jit(out_idx=[-1])
    def make():
        return triple

    assert make.compile() is make()
    assert make()(FakeDeviceTensor(2, 3)) == ("ran on", "fakegpu", "sm_93")


def test_mixed_devices_name_the_arguments(fake_gpu):
    @T.prim_func
    def add(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                C[i] = A[i] + B[i]

    kernel = tilelang.compile(add, out_idx=[-1])
    with pytest.raises(MixedDeviceError) as info:
        kernel(np.zeros(64, "float32"), FakeDeviceTensor(2, 0))
    message = str(info.value)
    assert "A on cpu" in message and "B on cuda:0" in message
    assert fake_gpu == []


def test_a_device_no_backend_claims_is_a_typed_error(fake_gpu):
    kernel = tilelang.compile(triple, out_idx=[-1])
    with pytest.raises(backend_api.BackendUnavailableError, match="vulkan device 0"):
        kernel(FakeDeviceTensor(7, 0))


def test_without_tensors_the_backends_auto_rule_decides():
    kernel = tilelang.compile(triple, out_idx=[-1])
    assert "T.prim_func" in kernel.get_kernel_source()  # the CPU backend's default source: TIR
    assert kernel.target.kind == "cpu"


def test_without_tensors_torch_s_accelerator_decides(fake_gpu, monkeypatch):
    import sys
    import types

    fake_torch = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(current_accelerator=lambda: "cuda"),
        empty=lambda size, device: FakeDeviceTensor(2, 0) if device == "cuda" else np.empty(size),
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    kernel = tilelang.compile(triple, out_idx=[-1])
    assert kernel.kernel_for(None)() == ("ran on", "fakegpu", "sm_90")
