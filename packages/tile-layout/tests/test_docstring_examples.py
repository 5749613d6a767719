"""The runnable examples in the public docstrings stay correct."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "tile.layout.layout",
    "tile.layout.fragment",
    "tile.layout.swizzle",
    "tile.layout.hardware.nvidia",
]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
