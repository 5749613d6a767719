"""The independent ISA oracle (``shared/docs/isa_tables.py``) for this package's tests.

Loaded once from beside the repository; ``isa`` is None where the file is absent, and
``needs_isa`` skips the tests that compare against it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ISA_TABLES = Path(__file__).resolve().parents[3].parent / "shared" / "docs" / "isa_tables.py"


def _load_isa() -> ModuleType | None:
    if not ISA_TABLES.exists():
        return None
    spec = importlib.util.spec_from_file_location("isa_tables_cuda_reference", ISA_TABLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


isa = _load_isa()
needs_isa = pytest.mark.skipif(isa is None, reason=f"reference tables not found at {ISA_TABLES}")
