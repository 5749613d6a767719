"""Target "auto" asks the CUDA backend which DLPack devices it runs on and for which arch."""

from tile.backends.cuda import MANIFEST
from tile.backends.cuda._src import backend
from tile.ir.backend import target_for_device


def test_cuda_memory_is_claimed_with_the_arch_of_that_gpu(monkeypatch):
    monkeypatch.setattr(backend, "device_arch", lambda index: {0: "sm_90a", 1: "sm_86"}.get(index))
    assert MANIFEST.device_target is not None
    assert MANIFEST.device_target(2, 0).arch == "sm_90a"
    assert MANIFEST.device_target(2, 1).arch == "sm_86"
    assert MANIFEST.device_target(2, 5).arch == backend.DEFAULT_ARCH  # the driver cannot say
    target, manifest = target_for_device(2, 1)
    assert (target.kind, target.arch, manifest.name) == ("cuda", "sm_86", "cuda")


def test_host_and_rocm_memory_are_not_claimed():
    assert MANIFEST.device_target(1, 0) is None
    assert MANIFEST.device_target(10, 0) is None
