"""The on-disk tuning cache: the best config of a tuning run, found again without benchmarking.

An entry is keyed like a kernel-cache entry (``cache.py``): the sha256 of a canonical
description of everything that decides which config wins, and nothing else:

* the program: the kernel factory's code (bytecode and constants), and the kernel it
  builds at the first config as TVMScript text without source locations
  (``cache.canonical_program``);
* the argument signature the factory was called with (minus ``do_not_specialize``);
* the config list, the compile options (``out_idx``, pass configs) and the checking
  settings (reference program's code, tolerances);
* the target, the device's name (``Capabilities.device_name``), the backend, and the
  versions and source digest of tile and TVM (``cache.toolchain_fingerprint``).

Layout: ``$TILE_CACHE_DIR/autotune-v1/<key[:2]>/<key>.json``, written to a private
temporary file, fsync'ed and published with one ``os.replace``, so concurrent tuners
never see half an entry (the last writer wins; both wrote a measured best). An entry that
does not parse or does not match its config list is ignored and tuning runs again.
``TILE_CACHE=0`` disables this cache too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from tile.ir.gpu.source_hooks import callable_fingerprint

from .. import env
from .cache import backend_fingerprint, canonical_program, plain_json, toolchain_fingerprint

FORMAT = "autotune-v1"


def plain(value: Any) -> Any:
    """``value`` as JSON data; ``TypeError`` when it has no stable text (an object whose
    text holds an address). Tuples become lists; objects with their own ``__str__`` (dtype
    objects) become that text."""
    return plain_json(value, objects_by_text=True)


def source_text(obj: Any) -> str | None:
    """What identifies a function's behaviour (``callable_fingerprint``: its bytecode, names and
    constants, so moving it to another line or file keeps its key); ``None`` for ``None``."""
    if obj is None:
        return None
    return callable_fingerprint(obj)


def tuning_key(
    *,
    factory: Any,
    first_func: Any,
    signature: Any,
    configs: Sequence[Mapping[str, Any]],
    compile_args: Mapping[str, Any],
    check_args: Mapping[str, Any],
    target: Any,
    manifest: Any,
    device_name: str,
) -> str | None:
    """The content-addressed key of a tuning run, or ``None`` when it cannot be cached
    (a config or argument that is not plain data)."""
    try:
        description = {
            "format": FORMAT,
            "factory": source_text(factory),
            "program": canonical_program(first_func),
            "signature": plain(signature),
            "configs": plain(list(configs)),
            "compile": plain(dict(compile_args)),
            "check": plain(dict(check_args)),
            "target": target.to_json(),
            "backend": manifest.name,
            "backend_code": backend_fingerprint(manifest),
            "device": device_name,
            "toolchain": toolchain_fingerprint(),
        }
    except TypeError:
        return None
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def cache_root() -> pathlib.Path:
    configured = env.CACHE_DIR.get().strip() or env.CACHE_DIR.default
    return pathlib.Path(os.path.expanduser(configured)).absolute() / FORMAT


def entry_path(key: str) -> pathlib.Path:
    return cache_root() / key[:2] / f"{key}.json"


def load(key: str | None, configs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The stored result for ``key`` if there is one and it names a config of ``configs``."""
    if key is None or not env.CACHE.get():
        return None
    try:
        entry = json.loads(entry_path(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    index = entry.get("best_index")
    if not isinstance(index, int) or not 0 <= index < len(configs):
        return None
    try:
        if plain(configs[index]) != entry.get("config"):
            return None
    except TypeError:
        return None
    return entry


def store(key: str | None, entry: dict[str, Any]) -> bool:
    """Publish ``entry`` under ``key`` atomically; ``False`` when the cache is off or unwritable."""
    if key is None or not env.CACHE.get():
        return False
    path = entry_path(key)
    staging = path.parent / f".{key}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with staging.open("w") as handle:
            json.dump({**entry, "key": key, "format": FORMAT}, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)
    except OSError:
        with contextlib.suppress(OSError):
            staging.unlink()
        return False
    return True
