"""Expert-tier builtins: external functions in kernels.

``T.import_source(code)`` records source code on the kernel (``tile.imported_sources``);
``T.call_extern(dtype, "name", *args)`` calls a function it defines. The code is in the
target's language and goes where the backend says (``Capabilities.imported_sources``):
on the CPU (``"host"``) it is C, compiled when the kernel is compiled by the host C
compiler (``cc``, ``gcc`` or ``clang`` on ``PATH``) into a shared object loaded with
``RTLD_GLOBAL``, so the JIT-compiled kernel resolves its symbols; on CUDA (``"device"``)
it is CUDA C++ (``__device__`` functions, inline PTX) that the backend prints into the
kernel's source, as TileLang does.

Example::

    T.import_source("float clamp01(float x) { return x < 0 ? 0 : (x > 1 ? 1 : x); }")
    for i in T.Parallel(128):
        B[i] = T.call_extern("float32", "clamp01", A[i])
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from tile.ir.annotations import IMPORTED_SOURCE_LINES, IMPORTED_SOURCES
from tile.ir.errors import SourceLocation

from ..errors import ImportSourceError, TileTypeError
from .dtypes import dtype_name
from .session import current_location, current_session

_COMPILERS = ("cc", "gcc", "clang")
_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()


def _compiler() -> str:
    for name in _COMPILERS:
        path = shutil.which(name)
        if path:
            return path
    raise ImportSourceError(
        "T.import_source needs a C compiler, and none of cc, gcc or clang is on PATH",
        hint="install one (e.g. apt-get install gcc) or put it on PATH",
    )


def load_c_source(code: str) -> Path:
    """Compile ``code`` into a shared object (cached by content) and load it globally."""
    digest = hashlib.sha256(code.encode()).hexdigest()[:24]
    with _lock:
        if digest in _loaded:
            return Path(_loaded[digest]._name)
        directory = Path(tempfile.gettempdir()) / f"tile-lang-extern-{os.getuid()}"
        directory.mkdir(parents=True, exist_ok=True)
        library = directory / f"{digest}.so"
        if not library.exists():
            source = directory / f"{digest}.{os.getpid()}.c"
            staging = directory / f"{digest}.{os.getpid()}.so"
            source.write_text(code)
            command = [_compiler(), "-O2", "-shared", "-fPIC", "-o", str(staging), str(source)]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            source.unlink(missing_ok=True)
            if result.returncode != 0:
                staging.unlink(missing_ok=True)
                raise ImportSourceError(
                    "T.import_source: the C compiler rejected the source:\n" + result.stderr.strip(),
                    hint="the code must be plain C that `cc -shared -fPIC` compiles",
                )
            os.replace(staging, library)  # atomic: concurrent processes see all or nothing
        _loaded[digest] = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        return library


def import_source(code: str | None) -> None:
    """Make the functions in ``code`` callable from this kernel with ``T.call_extern`` (C on
    the CPU, CUDA C++ on CUDA); the code is compiled with the kernel. ``None`` imports nothing
    (TileLang's examples pass their optional source unconditionally)."""
    if code is None:
        return
    if not isinstance(code, str):
        raise TileTypeError(f"T.import_source takes source text, got {type(code).__name__}")
    attrs = current_session("T.import_source").func_attrs
    where = current_location()
    line = "" if where is None else f"{where.filename}:{where.line}"
    attrs[IMPORTED_SOURCES] = [*attrs.get(IMPORTED_SOURCES, []), code]
    attrs[IMPORTED_SOURCE_LINES] = [*attrs.get(IMPORTED_SOURCE_LINES, []), line]


def load_host_sources(func: Any) -> None:
    """Compile and load the ``T.import_source`` code of ``func`` for a backend that calls it in
    this process (``Capabilities.imported_sources == "host"``).

    Raises:
        ImportSourceError: the host C compiler is missing or rejects the code; located at the
            ``T.import_source`` line.
    """
    attrs = func.attrs if func.attrs is not None else {}
    sources = [str(s) for s in attrs.get(IMPORTED_SOURCES, [])]
    lines = [str(s) for s in attrs.get(IMPORTED_SOURCE_LINES, [])]
    for index, code in enumerate(sources):
        try:
            load_c_source(code)
        except ImportSourceError as exc:
            filename, _, line = lines[index].rpartition(":") if index < len(lines) else ("", "", "")
            if filename and line.isdigit():
                raise exc.with_location(SourceLocation.from_file(filename, int(line))) from None
            raise


def call_extern(*args: Any, dtype: Any = None) -> Any:
    """A call to the external function ``name`` returning ``dtype`` (``"handle"`` for void):
    ``T.call_extern(dtype, "name", *args)``, or ``T.call_extern("name", *args, dtype=dtype)``
    as TileLang also takes it."""
    if dtype is None and args:  # the dtype first, positionally
        dtype, args = args[0], args[1:]
    name, rest = (args[0], args[1:]) if args else (None, ())
    if not isinstance(name, str) or not name.isidentifier():
        raise TileTypeError(
            f"T.call_extern needs a function name, got {name!r}",
            hint='write T.call_extern("float32", "my_func", x) '
            'or T.call_extern("my_func", x, dtype="float32")',
        )
    return tirx.call_extern(dtype_name(dtype), name, *rest)
