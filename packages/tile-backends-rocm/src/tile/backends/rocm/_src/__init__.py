"""The ROCm backend's implementation, imported lazily by ``tile.backends.rocm.MANIFEST``."""
