"""Expert-tier builtins: external C functions in kernels.

``T.import_source(code)`` compiles C source with the host C compiler (``cc``,
``gcc`` or ``clang`` on ``PATH``) into a shared object and loads it with
``RTLD_GLOBAL``, so the JIT-compiled kernel resolves its symbols;
``T.call_extern(dtype, "name", *args)`` calls one of them. The source is also
recorded on the kernel (``tile.imported_sources``) for backends that link it
themselves.

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

from ..errors import ImportSourceError, TileTypeError
from .dtypes import dtype_name
from .session import current_session

IMPORTED_SOURCES = "tile.imported_sources"
"""PrimFunc attribute: the C sources given to ``T.import_source``, in order."""

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


def import_source(code: str) -> None:
    """Make the C functions in ``code`` callable from this kernel with ``T.call_extern``."""
    if not isinstance(code, str):
        raise TileTypeError(f"T.import_source takes C source text, got {type(code).__name__}")
    session = current_session("T.import_source")
    load_c_source(code)
    sources = list(session.func_attrs.get(IMPORTED_SOURCES, []))
    sources.append(code)
    session.func_attrs[IMPORTED_SOURCES] = sources


def call_extern(dtype: Any, name: str, *args: Any) -> Any:
    """A call to the external function ``name`` returning ``dtype`` (``"handle"`` for void)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise TileTypeError(
            f"T.call_extern needs a function name, got {name!r}",
            hint='write T.call_extern("float32", "my_func", x)',
        )
    return tirx.call_extern(dtype_name(dtype), name, *args)
