"""The mutation check's fault table still matches the source (so it cannot rot silently).

Every row of ``conformance/mutation/run_mutations.py``'s ``FAULTS`` names a snippet that must
occur exactly once in its file; when a refactor moves the code, this fails with the row to
update. (The mutants themselves run in ``nox -s mutation``, a subset in CI's ``conformance``.)
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "mutation" / "run_mutations.py"


@pytest.fixture(scope="module")
def mutations():
    spec = importlib.util.spec_from_file_location("tile_conformance_run_mutations", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_every_fault_snippet_matches_its_source_once(mutations) -> None:
    assert mutations.check_snippets() == []


def test_a_stale_snippet_names_the_row_to_update(mutations, tmp_path) -> None:
    row, fault = 3, mutations.FAULTS[2]
    for other in mutations.FAULTS:
        target = tmp_path / other.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_text((pathlib.Path(SCRIPT).parents[2] / other.path).read_text())
    target = tmp_path / fault.path
    target.write_text(target.read_text().replace(fault.original, "# refactored away\n"))
    problems = mutations.check_snippets(tmp_path)
    assert len(problems) == 1
    assert f"row {row} ({fault.name!r})" in problems[0] and fault.path in problems[0]
    assert "found 0 times" in problems[0]


def test_the_table_covers_every_backend_and_the_gpu_faults(mutations) -> None:
    rows = mutations.FAULTS
    assert len(rows) >= 16
    for backend in mutations.BACKENDS:
        assert any(backend in f.backends for f in rows), backend
        assert any(backend in f.ci for f in rows), f"no CI fault on {backend}"
