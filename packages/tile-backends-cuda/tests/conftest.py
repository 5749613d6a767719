"""Shared fixtures of the CUDA backend tests: the ``gpu`` marker and its probe.

``python -m pytest -q -m gpu packages/tile-backends-cuda/tests`` runs the tests that
launch kernels; they skip (never fail) where no driver, device, torch CUDA build or
cuda-bindings is present. Everything else runs everywhere (compile-only: nvcc).
A module or test marked ``emu`` runs its kernels on the CPU emulator (``TILE_DEVICE=emu``).
"""

from __future__ import annotations

import functools

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: launches CUDA kernels; skipped without a usable GPU")
    config.addinivalue_line("markers", "emu: runs its kernels on the CPU emulator (TILE_DEVICE=emu)")


@pytest.fixture(autouse=True)
def _emulate_when_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("emu") is not None:
        monkeypatch.setenv("TILE_DEVICE", "emu")


@functools.cache
def gpu_missing() -> str | None:
    """Why GPU tests cannot run here, or None. Never raises."""
    try:
        from tile.backends.cuda import device_present

        if not device_present():
            return "no CUDA driver or device"
        import torch

        if not torch.cuda.is_available():
            return "torch has no CUDA support here"
        try:
            from cuda.bindings import driver  # noqa: F401
        except ImportError:
            from cuda import cuda  # noqa: F401
    except Exception as exc:  # the probe must never raise
        return f"GPU probe failed: {type(exc).__name__}: {exc}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    for item in items:
        if item.get_closest_marker("gpu") is None:
            continue
        reason = reason or gpu_missing()
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
