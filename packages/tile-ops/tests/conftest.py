"""``--run-slow``: also run the tests that take minutes on a small machine: torch.compile with
the inductor backend (it builds C++), and compiling the ops' kernels for every installed GPU
backend (nvcc/hipcc)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="run tile-ops' slow tests (inductor, GPU backend compiles)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes minutes (opt-in: --run-slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="takes minutes on a small machine; run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
