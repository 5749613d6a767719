"""``--run-inductor``: also run the tests that compile a model with torch.compile's inductor
backend (it builds C++ for the CPU: over a minute on a small machine)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-inductor",
        action="store_true",
        default=False,
        help="run the torch.compile(backend='inductor') tests of tile-ops",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "inductor: compiles with torch.compile's inductor (opt-in: --run-inductor)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-inductor"):
        return
    skip = pytest.mark.skip(reason="inductor builds C++ (over a minute); run with --run-inductor")
    for item in items:
        if "inductor" in item.keywords:
            item.add_marker(skip)
