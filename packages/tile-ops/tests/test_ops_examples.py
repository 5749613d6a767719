"""Every TileLang program under examples/ runs unchanged and checks itself.

The examples are the issue's acceptance kernels written as a TileLang user writes
them (only the two import lines differ); each asserts against numpy/torch and prints
``<name>: OK``. They run in-process (``runpy``) to spare an interpreter start each.
"""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py")) if EXAMPLES.is_dir() else []


@pytest.mark.skipif(not SCRIPTS, reason="not run from a checkout of the repository")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_example_runs_and_checks_itself(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if re.search(r"^import torch", script.read_text(), re.M):
        pytest.importorskip("torch")  # tile-ops does not depend on torch; some references use it
    monkeypatch.setattr(sys, "argv", [str(script)])  # as if run alone: not pytest's arguments
    runpy.run_path(str(script), run_name="__main__")
    assert f"{script.stem}: OK" in capsys.readouterr().out
