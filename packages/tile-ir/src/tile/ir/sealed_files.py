"""Native libraries kept in the cache are checksummed when written and verified before loading.

A damaged or truncated shared library that the loader maps crashes the process (SIGBUS
on a page past the end of the file, SIGSEGV on garbage) instead of raising an error. So
every library tile builds into ``TILE_CACHE_DIR`` (the CPU backend's micro-kernel libraries,
the emulator runtime, emulated kernels, the GPU layer's native launcher) is written with a
``<name>.sha256`` seal beside it, and a file whose seal is missing or does not match is
rebuilt, never loaded.

The seal is written before the library is moved into place, so a reader never finds a
new library without its seal; two processes building the same library at once write
the same bytes (a rebuild is the worst case, never an unverified load).

Example::

    output = cache / "libx-123.so"
    if not is_sealed(output):
        build_into(tmp)
        install_sealed(tmp, output)
    ctypes.CDLL(str(output))
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import subprocess
import tempfile
from collections.abc import Sequence

SEAL_SUFFIX = ".sha256"


def _seal_of(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + SEAL_SUFFIX)


def file_digest(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_sealed(path: pathlib.Path) -> bool:
    """Whether ``path`` exists and its bytes match its seal (False: build it again)."""
    try:
        expected = _seal_of(path).read_text().strip()
        return bool(expected) and file_digest(path) == expected
    except OSError:
        return False


def install_sealed(built: pathlib.Path, output: pathlib.Path) -> None:
    """Seal the freshly built file ``built`` and move it to ``output`` (same folder)."""
    digest = file_digest(built)
    fd, tmp = tempfile.mkstemp(suffix=SEAL_SUFFIX, dir=output.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(digest + "\n")
        os.replace(tmp, _seal_of(output))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    os.replace(built, output)


def build_shared_library(
    cxx: str, args: Sequence[str], output: pathlib.Path
) -> subprocess.CompletedProcess[str]:
    """Run ``cxx *args -o <tmp>`` and, if it succeeds, seal the result and move it to ``output``.

    The move is atomic and the seal (``<output>.sha256``) is written first, so a process
    that finds ``output`` sealed finds a whole library (``is_built``). The caller reads the
    returned result's ``returncode`` and ``stderr`` and raises its own typed error on
    failure (``output`` is then left as it was).
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=output.parent)
    os.close(fd)
    try:
        result = subprocess.run([cxx, *args, "-o", tmp], capture_output=True, text=True, check=False)
        if result.returncode == 0:
            install_sealed(pathlib.Path(tmp), output)  # checksummed: verified before every load
        return result
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
