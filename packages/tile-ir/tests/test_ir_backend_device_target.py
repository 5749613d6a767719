"""``target_for_device``: which installed backend runs kernels on a DLPack device."""

import pytest

from tile.ir.backend import BackendUnavailableError, target_for_device


def test_a_device_no_backend_claims_names_it():
    with pytest.raises(BackendUnavailableError, match="metal device 0"):
        target_for_device(8, 0)
