"""Running a backend's external tools (compilers, disassemblers) as subprocesses.

Backends never import a vendor SDK to compile: nvcc, ptxas, hipcc, llvm-readelf and the
like run as subprocesses through :func:`run_tool`, which turns every way a tool can fail
(missing, timed out, non-zero exit) into the backend's own typed error, keeping the
compiler's error lines. :class:`ToolVersion` is the version a tool reports.

Example::

    >>> from tile.ir.errors import BackendError
    >>> run_tool(["python3", "-c", "print('ok')"], "python3", error=BackendError, timeout=60).stdout
    'ok\\n'
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tile.layout.errors import TileError


@dataclasses.dataclass(frozen=True, order=True)
class ToolVersion:
    """A ``major.minor.patch`` version, e.g. ``ToolVersion(13, 0, 88)`` for nvcc ``V13.0.88``."""

    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def is_executable(path: Path) -> bool:
    """Whether ``path`` is a file this process may execute."""
    return path.is_file() and os.access(path, os.X_OK)


def run_tool(
    cmd: Sequence[str],
    what: str,
    *,
    error: type[TileError],
    timeout: float,
    run_hint: str = "check that the tool is installed and works",
    failure_hint: str = "",
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` and return its completed process (text output captured).

    Raises:
        error: the tool could not be started or timed out (``run_hint``), or exited with a
            non-zero status: the message holds its error lines (all of stderr where no line
            says "error"), ``failure_hint`` says where to look.
    """
    try:
        done = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"{what} failed to run: {exc}", hint=run_hint) from exc
    if done.returncode != 0:
        errors = "\n".join(line for line in done.stderr.splitlines() if "error" in line.lower())
        detail = (errors or done.stderr.strip() or done.stdout.strip())[:2000]
        raise error(f"{what} exited with status {done.returncode}: {detail}", hint=failure_hint or run_hint)
    return done


DEVICE_COMPILE_TIMEOUT_S = 300.0
"""How long a device compiler or disassembler may run before the build is given up."""


@dataclasses.dataclass(frozen=True)
class ToolRunner:
    """:func:`run_tool` with one backend's settings: its error type, what to check when a tool
    does not run (``run_hint``) or fails (``failure_hint``), and the environment to run it in
    (``environment()``, asked on every run; None: this process's).

    Example::

        >>> from tile.ir.errors import BackendError
        >>> run = ToolRunner(BackendError, "check the python3 install")
        >>> run(["python3", "-c", "print('ok')"], "python3").stdout
        'ok\\n'
    """

    error: type[TileError]
    run_hint: str
    failure_hint: str = ""
    environment: Callable[[], Mapping[str, str]] | None = None
    timeout: float = DEVICE_COMPILE_TIMEOUT_S

    def __call__(self, cmd: Sequence[str], what: str) -> subprocess.CompletedProcess[str]:
        env = self.environment() if self.environment is not None else None
        return run_tool(
            cmd, what, error=self.error, timeout=self.timeout, run_hint=self.run_hint,
            failure_hint=self.failure_hint, env=env,
        )  # fmt: skip

    def on_bytes(self, tool: Path, args: Sequence[str], data: bytes, filename: str, what: str) -> str:
        """The standard output of ``tool *args <file>``, where the file (named ``filename``, in a
        fresh temporary folder) holds ``data``: a disassembler or note reader over machine code.

        Example::

            >>> from tile.ir.errors import BackendError
            >>> ToolRunner(BackendError, "").on_bytes(Path("/bin/cat"), [], b"ok", "x.bin", "cat")
            'ok'
        """
        with tempfile.TemporaryDirectory(prefix="tile-tool-") as tmp:
            path = Path(tmp) / filename
            path.write_bytes(data)
            return self([str(tool), *args, str(path)], what).stdout
