"""The repository README's TileLang-style example runs unchanged and checks itself."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[3] / "README.md"


@pytest.mark.skipif(not README.exists(), reason="not run from a checkout of the repository")
def test_readme_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README lost its python example"
    script = tmp_path / "readme_example.py"  # TVMScript parses real source files
    script.write_text(blocks[0] + "\nprint('README example OK')\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "README example OK" in done.stdout
