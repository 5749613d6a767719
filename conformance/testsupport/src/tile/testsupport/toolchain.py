"""Fake compiler executables and a bare environment for the backends' toolchain-lookup tests."""

from __future__ import annotations

import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest


def write_fake_tool(path: Path, answers: Mapping[str, str], on_stderr: Iterable[str] = ()) -> Path:
    """An executable shell script at ``path`` that, for the first of its arguments that is a key
    of ``answers``, prints that answer (to stderr for a flag in ``on_stderr``) and exits 0; with
    none, it fails with status 2. Shell builtins only, so it runs under the empty PATH of
    :func:`bare_toolchain_env`."""
    assert all("'" not in text for text in answers.values())
    cases = "".join(
        f"    {flag}) printf '%s' '{text}'{' >&2' if flag in set(on_stderr) else ''}; exit 0 ;;\n"
        for flag, text in answers.items()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '#!/bin/sh\nfor arg in "$@"; do\n  case "$arg" in\n' + cases + "  esac\ndone\n"
        "echo unknown flags >&2; exit 2\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def write_failing_tool(path: Path, message: str, status: int) -> Path:
    """An executable that prints ``message`` to stderr and exits with ``status``, whatever it is asked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {message} >&2\nexit {status}\n")
    path.chmod(0o755)
    return path


def bare_toolchain_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variables: Iterable[str]) -> Path:
    """No toolchain anywhere on PATH and none of ``variables`` set; returns ``tmp_path`` to put
    fake tools under (the backend's own fixture also empties its list of system roots)."""
    for name in variables:
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return tmp_path
