"""``target_for_device``: which installed backend runs kernels on a DLPack device."""

import pytest

from tile.ir.backend import BackendUnavailableError, target_for_device


def test_host_memory_goes_to_the_cpu_backend():
    target, manifest = target_for_device(1, 0)
    assert (target.kind, manifest.name) == ("cpu", "cpu")


def test_a_device_no_backend_claims_names_it():
    with pytest.raises(BackendUnavailableError, match="metal device 0"):
        target_for_device(8, 0)
