"""``carver.arch.driver`` and ``tile.lang.transform``: the names TileLang's examples import.

The device figures are the published ones of the GPUs, written out by hand: an H100 SXM
(sm_90a) has 132 SMs and lets a block opt in to 227 KiB of shared memory, an A100 (sm_80)
108 SMs and 163 KiB; both have 64 Ki 32-bit registers per SM.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TargetError
from tile.lang.carver.arch import driver
from tile.lang.transform import PassConfigKey, simplify_prim_func

H100 = '{"kind": "cuda", "arch": "sm_90a"}'
A100 = '{"kind": "cuda", "arch": "sm_80"}'


@pytest.fixture
def no_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return monkeypatch


@pytest.mark.parametrize(("target", "sms", "smem_kib"), [(H100, 132, 227), (A100, 108, 163)])
def test_figures_of_the_default_cuda_target(no_gpu, target, sms, smem_kib):
    no_gpu.setenv("TILE_DEFAULT_TARGET", target)
    assert driver.get_num_sms() == sms
    assert driver.get_shared_memory_per_block() == smem_kib * 1024
    assert driver.get_shared_memory_per_block(format="kb") == smem_kib
    assert driver.get_max_dynamic_shared_size_bytes() == smem_kib * 1024
    assert driver.get_registers_per_block() == 65536
    assert "sm_" in driver.get_device_name()


def test_a_cpu_default_still_answers_for_cuda(no_gpu):
    no_gpu.setenv("TILE_DEFAULT_TARGET", "cpu")
    assert driver.cuda_target_here().kind == "cuda"
    assert driver.get_num_sms() > 0


def test_a_visible_gpu_answers_for_itself(monkeypatch):
    torch = pytest.importorskip("torch")
    props = types.SimpleNamespace(
        multi_processor_count=114,
        name="NVIDIA H100 PCIe",
        shared_memory_per_block_optin=232448,
        regs_per_multiprocessor=65536,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device_id: props)
    assert driver.get_num_sms() == 114
    assert driver.get_device_name() == "NVIDIA H100 PCIe"
    assert driver.get_shared_memory_per_block(format="kb") == 227


def test_unknown_size_format(no_gpu):
    with pytest.raises(TargetError, match="unknown size format"):
        driver.get_shared_memory_per_block(format="gib")


def test_transform_names():
    assert PassConfigKey is tilelang.PassConfigKey
    assert PassConfigKey.TL_DISABLE_WARP_SPECIALIZED.value == "tl.disable_warp_specialized"


def test_simplify_prim_func_keeps_the_kernel_working():
    @simplify_prim_func
    def scaled_add(n, block):
        @T.prim_func
        def kernel(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block)) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] * 2.0 + B[bx * block + i]

        return kernel

    assert scaled_add.__name__ == "scaled_add"
    kernel = tilelang.compile(scaled_add(64, 16), target="cpu")
    a = np.arange(64, dtype=np.float32)
    b = np.full(64, 0.5, dtype=np.float32)
    c = np.zeros(64, dtype=np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, 2 * a + 0.5)
