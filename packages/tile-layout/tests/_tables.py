"""Helpers shared by the fragment table tests: fragment -> {(thread, local): coord}."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from tile.layout import Fragment

# The workspace keeps shared/ beside the repository (CI clones it the same way).
ISA_TABLES = Path(__file__).resolve().parents[3].parent / "shared" / "docs" / "isa_tables.py"

Table = dict[tuple[int, int], tuple[int, ...]]


def fragment_table(frag: Fragment) -> Table:
    """Every (thread, local) slot of an unreplicated, 1-d-indexed fragment -> its coord."""
    table: Table = {}
    for coord, rep, thread, local in frag.enumerate_threads():
        assert rep == 0 and len(local) == 1
        assert (thread, local[0]) not in table, f"slot {(thread, local[0])} holds two elements"
        table[(thread, local[0])] = coord
    return table


def oracle_table(fn: Callable[[int, int], tuple[int, ...]], threads: int, elems: int) -> Table:
    """``fn(thread, element) -> coord`` tabulated over every thread and element."""
    return {(t, i): tuple(fn(t, i)) for t in range(threads) for i in range(elems)}


def load_isa_tables() -> ModuleType | None:
    """The shared reference tables, loaded by path, or None when the file is absent."""
    if not ISA_TABLES.exists():
        return None
    spec = importlib.util.spec_from_file_location("isa_tables_reference", ISA_TABLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
