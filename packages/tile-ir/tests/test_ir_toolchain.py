"""tile.ir.toolchain: external tools fail as the backend's typed errors, keeping their error lines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tile.ir.errors import BackendError
from tile.ir.toolchain import ToolVersion, is_executable, run_tool


class FakeToolError(BackendError):
    pass


def test_a_failing_tool_keeps_its_error_lines_and_status(tmp_path: Path) -> None:
    script = "import sys; print('note: x\\nk.cu(3): error: bad', file=sys.stderr); sys.exit(2)"
    cmd = [sys.executable, "-c", script]
    with pytest.raises(FakeToolError, match=r"exited with status 2: k\.cu\(3\): error: bad") as caught:
        run_tool(cmd, "fake-cc", error=FakeToolError, timeout=60, failure_hint="look")
    assert "note: x" not in str(caught.value)
    assert caught.value.hint == "look"


def test_a_missing_tool_is_the_backends_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tool"
    assert not is_executable(missing)
    with pytest.raises(FakeToolError, match="fake-cc failed to run"):
        run_tool([str(missing)], "fake-cc", error=FakeToolError, timeout=60, run_hint="install it")


def test_tool_versions_order_by_number() -> None:
    assert ToolVersion(12, 9) < ToolVersion(12, 10) < ToolVersion(13, 0, 1)
    assert str(ToolVersion(6, 2)) == "6.2.0"
