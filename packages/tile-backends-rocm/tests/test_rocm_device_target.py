"""Target "auto" asks the ROCm backend which DLPack devices it runs on and for which gfx arch."""

import sys
import types

from tile.backends.rocm import MANIFEST
from tile.ir.backend import target_for_device


def _torch_stub(arch_names: dict[int, str]) -> types.ModuleType:
    """What the ROCm build of torch answers: ``torch.cuda.get_device_properties(i).gcnArchName``."""
    torch = types.ModuleType("torch")
    props = {i: types.SimpleNamespace(gcnArchName=name) for i, name in arch_names.items()}
    torch.cuda = types.SimpleNamespace(get_device_properties=lambda index: props[index])
    return torch


def test_rocm_memory_is_claimed_with_the_gfx_arch_of_that_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _torch_stub({0: "gfx942:sramecc+:xnack-", 1: "gfx90a"}))
    assert MANIFEST.device_target is not None
    assert MANIFEST.device_target(10, 0).option("mcpu") == "gfx942"
    target, manifest = target_for_device(10, 1)
    assert (target.kind, target.option("mcpu"), manifest.name) == ("hip", "gfx90a", "rocm")
    assert MANIFEST.device_target(10, 7).option("mcpu") == "gfx90a"  # unknown device: the default


def test_host_and_cuda_memory_are_not_claimed():
    assert MANIFEST.device_target(1, 0) is None
    assert MANIFEST.device_target(2, 0) is None
