"""The shared error hierarchy and the typed environment-variable mechanism."""

from __future__ import annotations

from pathlib import Path

import pytest

from tile.layout.env import EnvVar, declared, parse_bool
from tile.layout.errors import (
    EnvironmentVariableError,
    LayoutError,
    SourceLocation,
    TileError,
)


def test_error_renders_location_caret_and_hint() -> None:
    loc = SourceLocation("kern.py", 12, 4, "    T.copy(A, B)")
    text = str(TileError("extents differ", hint="copy equal shapes", location=loc))
    assert text.splitlines() == [
        "extents differ",
        "  --> kern.py:12:5",
        "   |",
        "12 |     T.copy(A, B)",
        "   |     ^",
        "hint: copy equal shapes",
    ]


def test_location_reads_source_line_from_file(tmp_path: Path) -> None:
    src = tmp_path / "k.py"
    src.write_text("a = 1\nb = 2\n")
    loc = SourceLocation.from_file(str(src), 2, 0)
    assert loc.source_line == "b = 2"
    assert "2 | b = 2" in loc.render()


def test_with_location_keeps_first_location() -> None:
    first = SourceLocation("a.py", 1)
    err = TileError("x", location=first).with_location(SourceLocation("b.py", 2))
    assert err.location is first


def test_subclasses_share_root() -> None:
    assert issubclass(LayoutError, TileError)
    assert issubclass(EnvironmentVariableError, TileError)


def test_env_var_default_parse_and_error(monkeypatch: pytest.MonkeyPatch) -> None:
    var = EnvVar("TILE_TEST_LEVEL", int, 3, "a test knob")
    monkeypatch.delenv("TILE_TEST_LEVEL", raising=False)
    assert var.get() == 3 and not var.is_set()
    monkeypatch.setenv("TILE_TEST_LEVEL", "7")
    assert var.get() == 7
    monkeypatch.setenv("TILE_TEST_LEVEL", "seven")
    with pytest.raises(EnvironmentVariableError, match="TILE_TEST_LEVEL='seven'"):
        var.get()
    assert declared()["TILE_TEST_LEVEL"] is var


@pytest.mark.parametrize(("text", "value"), [("1", True), ("ON", True), ("no", False), ("", False)])
def test_parse_bool(text: str, value: bool) -> None:
    assert parse_bool(text) is value


def test_parse_bool_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_bool("maybe")
