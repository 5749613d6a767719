"""The on-disk kernel cache: compile a kernel once, load it in every later process.

An entry is keyed by the sha256 of a canonical description of everything that
decides the compiled code, and nothing else:

* the kernel's IR as TVMScript text, without source-location attributes (moving a
  kernel to another line or file keeps its key);
* ``out_idx``, the canonical JSON of the target, the backend and its pass list, and
  the compile options (plain JSON values only: an option that is not, such as an
  object whose ``repr`` holds an address, makes the kernel uncacheable);
* the versions of apache-tvm, apache-tvm-ffi and every installed ``tile-*``
  distribution, plus a digest of the ``tile`` sources (an editable install keeps
  its version while its code changes).

Symbolic dims stay symbolic in the IR text, so their runtime values never reach the
key. Only backends whose manifest has ``save`` and ``restore`` are cached.

Layout: ``$TILE_CACHE_DIR/v1/<key[:2]>/<key>/`` holds ``meta.json`` (entry name,
target, parameters, sha256 of every other file), ``payload/`` (written by the
backend's ``save``) and ``sources/`` (``get_kernel_source`` texts). An entry is
written in a private temporary directory, fsync'ed and published with one
``rename``, so readers never see half an entry. Compilation of one key is
serialized across processes by an ``fcntl`` lock; without ``fcntl`` the rename
still keeps entries whole. An entry whose checksums fail, or that the backend
cannot load, is reported with a ``KernelCacheWarning``, removed and rebuilt.

``TILE_CACHE=0`` disables the cache (nothing is read or written).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import pathlib
import shutil
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tile.ir.annotations import (
    IMPORTED_SOURCE_LINES,
    THREAD_ATOMICS,
    THREAD_ID_READS,
    THREAD_LEVEL_CALLS,
    WARP_MATRIX_CALLS,
)
from tile.ir.backend import BackendManifest, BuildArtifact
from tile.ir.gpu.source_hooks import hook_fingerprints
from tile.ir.target import Target

from .. import env
from .arguments import param_specs
from .session import SOURCE_ATTR

FORMAT = "v1"
META_FILE = "meta.json"
PAYLOAD_DIR = "payload"
SOURCES_DIR = "sources"
LOCATION_ATTRS = (SOURCE_ATTR, THREAD_ID_READS, THREAD_ATOMICS, THREAD_LEVEL_CALLS, WARP_MATRIX_CALLS,
                  IMPORTED_SOURCE_LINES)
"""Function attributes that hold source locations; they are left out of the key."""

_VERSIONED = ("apache-tvm", "apache-tvm-ffi", "nvidia-cutlass")
"""Other distributions whose version is in the key: TVM, and the CUTLASS headers impl="cute" compiles."""
_SOURCE_SUFFIXES = (".py", ".h", ".hpp", ".cpp", ".cc", ".c")
"""Files of the tile packages in the key: Python, and the device headers and native sources kernels
are compiled with (``tile_cuda.h``, ``tile_hip.h``, the emulator's runtime, CPU micro-kernels)."""


class KernelCacheWarning(UserWarning):
    """A cache entry was unusable (corrupt, truncated, or unwritable); the kernel is rebuilt."""


@dataclasses.dataclass
class CacheStats:
    """Counters for this process: ``hits`` loaded from disk, ``misses`` built, ``corrupt`` rebuilt."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    stores: int = 0


stats = CacheStats()


_switched: list[bool] = []
"""The process-wide choice of ``enable_cache()``/``disable_cache()``; empty: ``TILE_CACHE`` decides."""


def cache_enabled() -> bool:
    """Whether kernels are read from and written to the on-disk cache (``is_cache_enabled``)."""
    return _switched[-1] if _switched else bool(env.CACHE.get())


def enable_cache() -> None:
    """Use the on-disk kernel cache in this process, whatever ``TILE_CACHE`` says (TileLang API)."""
    _switched[:] = [True]


def disable_cache() -> None:
    """Compile every kernel afresh in this process: no cache reads or writes (TileLang API)."""
    _switched[:] = [False]


def cache_dir() -> pathlib.Path:
    """The cache root (``TILE_CACHE_DIR``, default ``~/.cache/tile``; empty means the default)."""
    configured = env.CACHE_DIR.get().strip() or env.CACHE_DIR.default
    return pathlib.Path(os.path.expanduser(configured)).absolute() / FORMAT


# ----------------------------------------------------------------------------- keys


def canonical_program(func: Any) -> str:
    """The kernel's TVMScript text without source-location attributes, with its metadata.

    ``show_meta``: TVMScript prints a string with a newline (a ``T.import_source`` code block)
    as a reference into a metadata section it leaves out by default, so two kernels that
    differ only in such a string printed alike and shared a cache entry: the second got the
    first's machine code.
    """
    attrs = getattr(func, "attrs", None)
    for name in LOCATION_ATTRS:
        if attrs is not None and name in attrs:
            func = func.without_attr(name)
            attrs = func.attrs
    return str(func.script(show_meta=True))


def plain_json(value: Any, *, objects_by_text: bool = False) -> Any:
    """``value`` as plain JSON data (floats by ``repr``, tuples as lists, mappings with sorted
    string keys), or ``TypeError`` when it is not plain data.

    With ``objects_by_text``, any ``Mapping`` is data, and an object with its own stable
    ``__str__`` (a dtype object) becomes ``"TypeName:text"``; one whose text holds an address
    is still a ``TypeError``. Without it only ``dict`` is a mapping and objects are refused.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple):
        return [plain_json(v, objects_by_text=objects_by_text) for v in value]
    if isinstance(value, dict) or (objects_by_text and isinstance(value, Mapping)):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return {str(k): plain_json(v, objects_by_text=objects_by_text) for k, v in items}
    if objects_by_text:
        text = str(value)
        if type(value).__str__ is not object.__str__ and " at 0x" not in text:
            return f"{type(value).__name__}:{text}"
    raise TypeError(type(value).__name__)


def _is_tile_distribution(name: str) -> bool:
    normalized = name.lower().replace("_", "-")
    return normalized.startswith("tile-") or normalized in _VERSIONED


_fingerprint: dict[str, Any] | None = None
_INFO_SUFFIXES = (".dist-info", ".egg-info")


def _installed_versions() -> dict[str, str]:
    """Versions of the tile distributions and tvm, first on ``sys.path`` wins.

    Read from the ``<name>-<version>.dist-info`` directory names (the wheel naming
    rule), which costs one ``scandir`` per path entry; parsing every installed
    distribution's metadata with ``importlib.metadata`` took 20-40 ms of each cache
    hit. A name without a version falls back to ``importlib.metadata``.
    """
    versions: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = sorted(e.name for e in os.scandir(entry or "."))
        except OSError:
            continue
        for name in names:
            suffix = next((x for x in _INFO_SUFFIXES if name.endswith(x)), None)
            if suffix is None:
                continue
            dist, _, version = name[: -len(suffix)].partition("-")
            if not _is_tile_distribution(dist):
                continue
            key = dist.lower().replace("_", "-")
            if key in versions:
                continue
            if not version:
                try:
                    version = importlib.metadata.version(dist)
                except importlib.metadata.PackageNotFoundError:
                    continue
            versions[key] = version.split("-")[0]  # egg-info may append "-py3.11"
    return versions


FINGERPRINTS_DIR = "fingerprints"
"""Under the cache root: the source digest of each state of the tile sources, by their stats."""


def _source_files() -> list[tuple[str, str, int, int]]:
    """(root, path relative to it, size, mtime in ns) of every ``_SOURCE_SUFFIXES`` file under the
    ``tile`` namespace, sorted."""
    import tile

    found = []

    def scan(root: str, folder: str, prefix: str) -> None:
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    scan(root, entry.path, f"{prefix}{entry.name}/")
                elif entry.name.endswith(_SOURCE_SUFFIXES):
                    with contextlib.suppress(OSError):
                        st = entry.stat()
                        found.append((root, prefix + entry.name, st.st_size, st.st_mtime_ns))

    for root in sorted({str(p) for p in tile.__path__}):
        scan(root, root, "")
    return sorted(found)


def _content_digest(files: list[tuple[str, str, int, int]]) -> str:
    digest = hashlib.sha256()
    for root, relative, _, _ in files:
        digest.update(relative.encode())
        digest.update(b"\0")
        with contextlib.suppress(OSError):
            digest.update(hashlib.sha256(pathlib.Path(root, relative).read_bytes()).digest())
    return digest.hexdigest()


def _sources_digest() -> str:
    """A digest of the contents of the tile sources, read once per state of the files.

    Hashing every file (about 350) took 25-30 ms of each new process's first cache hit. The
    digest of a state is kept under the cache root, named by a digest of every file's path,
    size and modification time: Python's own rule for its bytecode cache, so an edit that
    Python would notice is noticed here, and the contents are read again only then.
    """
    files = _source_files()
    stats = hashlib.sha256(repr(files).encode()).hexdigest()
    memo = cache_dir() / FINGERPRINTS_DIR / stats
    with contextlib.suppress(OSError, UnicodeDecodeError):
        known = memo.read_text().strip()
        if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
            return known
    digest = _content_digest(files)
    with contextlib.suppress(OSError):
        memo.parent.mkdir(parents=True, exist_ok=True)
        staged = memo.with_name(f"{stats}.{os.getpid()}.tmp")
        staged.write_text(digest)
        os.replace(staged, memo)  # atomic: a reader sees no file or the whole digest
    return digest


def toolchain_fingerprint() -> dict[str, Any]:
    """Versions of tvm and the tile distributions, and a digest of the ``tile`` sources.

    The sources are every ``_SOURCE_SUFFIXES`` file under the ``tile`` namespace: an edit
    to a device header changes the code a kernel compiles to as surely as one to a pass.
    """
    global _fingerprint
    if _fingerprint is not None:
        return _fingerprint
    versions = _installed_versions()
    _fingerprint = {"versions": dict(sorted(versions.items())), "sources": _sources_digest()}
    return _fingerprint


_backend_digests: dict[str, str] = {}


def backend_fingerprint(manifest: BackendManifest) -> str:
    """What identifies the backend's code: ``"tile"`` for backends inside the ``tile``
    namespace (their sources are in ``toolchain_fingerprint``), else a digest of the
    Python sources of the package that defines the manifest's callables (a vendor's
    backend: its pass list and lowering rules live there).

    Asking the manifest for its pass list instead would import every pass module on
    each cache hit (~10 ms), and pass names miss edits to the passes themselves.
    """
    if manifest.name in _backend_digests:
        return _backend_digests[manifest.name]
    module_name = getattr(manifest.build, "__module__", "") or ""
    import tile

    tile_roots = [pathlib.Path(p).resolve() for p in tile.__path__]
    files: list[pathlib.Path] = []
    location = getattr(sys.modules.get(module_name), "__file__", None)
    if location:
        root = pathlib.Path(location).resolve().parent
        if any(root == t or t in root.parents for t in tile_roots):
            _backend_digests[manifest.name] = "tile"
            return "tile"
        files = sorted(root.rglob("*.py"))
    digest = hashlib.sha256(module_name.encode())
    for path in files:
        digest.update(path.name.encode())
        with contextlib.suppress(OSError):
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    _backend_digests[manifest.name] = digest.hexdigest()
    return _backend_digests[manifest.name]


def kernel_key(
    func: Any,
    out_idx: Sequence[int],
    target: Target,
    manifest: BackendManifest,
    options: dict[str, Any],
) -> str | None:
    """The content-addressed key of a compilation, or ``None`` when it cannot be cached."""
    try:
        opts = plain_json(options)
    except TypeError:
        return None
    description = {
        "format": FORMAT,
        "program": canonical_program(func),
        "entry": str(getattr(func, "__name__", None) or "main"),
        "out_idx": [int(i) for i in out_idx],
        "target": target.to_json(),
        "backend": manifest.name,
        "backend_code": backend_fingerprint(manifest),
        "options": opts,
        "toolchain": toolchain_fingerprint(),
    }
    hooks = hook_fingerprints()  # engine.callback's post-processing of device source
    if hooks:
        description["source_hooks"] = hooks
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# ----------------------------------------------------------------------------- files


def _sha256_file(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_tree(root: pathlib.Path) -> None:
    for path in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    for directory in [*(p for p in root.rglob("*") if p.is_dir()), root]:
        with contextlib.suppress(OSError):  # some platforms cannot fsync a directory
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _payload_files(entry: pathlib.Path) -> dict[str, str]:
    return {
        path.relative_to(entry).as_posix(): _sha256_file(path)
        for path in sorted(entry.rglob("*"))
        if path.is_file() and path.name != META_FILE
    }


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
    """Hold an exclusive inter-process lock on ``path`` (a no-op without ``fcntl``)."""
    try:
        import fcntl
    except ImportError:  # rename-based publication alone keeps entries whole
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _discard(entry: pathlib.Path, root: pathlib.Path) -> None:
    """Move ``entry`` out of the way atomically, then delete it."""
    trash = root / "tmp" / f"trash-{entry.name}-{uuid.uuid4().hex}"
    try:
        trash.parent.mkdir(parents=True, exist_ok=True)
        os.rename(entry, trash)
    except OSError:
        shutil.rmtree(entry, ignore_errors=True)
        return
    shutil.rmtree(trash, ignore_errors=True)


class _Unusable(Exception):
    """An entry failed a check; the message says which."""


def _read_entry(entry: pathlib.Path, key: str, target: Target, manifest: BackendManifest) -> BuildArtifact:
    try:
        meta = json.loads((entry / META_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise _Unusable(f"{META_FILE} is unreadable ({type(exc).__name__})") from None
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("format") != FORMAT:
        raise _Unusable(f"{META_FILE} does not describe this key")
    files = meta.get("files")
    if not isinstance(files, dict) or not files:
        raise _Unusable(f"{META_FILE} lists no files")
    for relative, expected in sorted(files.items()):
        path = entry / relative
        if not path.is_file():
            raise _Unusable(f"{relative} is missing")
        if _sha256_file(path) != expected:
            raise _Unusable(f"{relative} fails its sha256 checksum (truncated or modified)")
    sources = {
        name: (entry / SOURCES_DIR / f"{name}.txt").read_text() for name in meta.get("sources", [])
    }
    assert manifest.restore is not None
    try:
        payload = manifest.restore(entry / PAYLOAD_DIR, target)
    except Exception as exc:  # whatever the backend raises, the entry cannot be used
        raise _Unusable(f"the {manifest.name} backend could not load it: {exc}") from None
    return BuildArtifact(target=target, entry_name=str(meta["entry_name"]), payload=payload, sources=sources)


def _publish(
    entry: pathlib.Path,
    root: pathlib.Path,
    key: str,
    func: Any,
    out_idx: Sequence[int],
    artifact: BuildArtifact,
    manifest: BackendManifest,
) -> None:
    assert manifest.save is not None
    staging = root / "tmp" / f"{key}.{os.getpid()}.{uuid.uuid4().hex}"
    try:
        (staging / PAYLOAD_DIR).mkdir(parents=True)
        manifest.save(artifact, staging / PAYLOAD_DIR)
        (staging / SOURCES_DIR).mkdir()
        for name, text in artifact.sources.items():
            (staging / SOURCES_DIR / f"{name}.txt").write_text(text)
        meta = {
            "format": FORMAT,
            "key": key,
            "entry_name": artifact.entry_name,
            "backend": manifest.name,
            "target": artifact.target.to_json(),
            "out_idx": [int(i) for i in out_idx],
            "params": [dataclasses.asdict(p) for p in param_specs(func)],
            "sources": sorted(artifact.sources),
            "files": _payload_files(staging),
        }
        (staging / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True))
        _fsync_tree(staging)
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, entry)
        except OSError:  # another process published first; its entry is as good as ours
            if not (entry / META_FILE).is_file():
                raise
        else:
            stats.stores += 1
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_with_cache(
    func: Any,
    out_idx: Sequence[int],
    target: Target,
    manifest: BackendManifest,
    options: dict[str, Any],
    build: Callable[[], BuildArtifact],
) -> BuildArtifact:
    """Return the cached artifact for this compilation, or ``build()`` it and store it.

    Falls back to a plain ``build()`` when the cache is disabled, the backend cannot
    save its artifacts, or the options are not plain data.
    """
    if not cache_enabled() or manifest.save is None or manifest.restore is None:
        return build()
    key = kernel_key(func, out_idx, target, manifest, options)
    if key is None:
        return build()
    root = cache_dir()
    entry = root / key[:2] / key
    try:
        lock = _locked(root / "locks" / f"{key}.lock")
        lock.__enter__()
    except OSError as exc:
        warnings.warn(
            f"kernel cache {root} is not writable ({exc}); compiling without it "
            f"(set {env.CACHE_DIR.name} or {env.CACHE.name}=0)",
            KernelCacheWarning,
            stacklevel=3,
        )
        return build()
    try:
        if entry.exists():
            try:
                artifact = _read_entry(entry, key, target, manifest)
            except _Unusable as why:
                stats.corrupt += 1
                warnings.warn(
                    f"kernel cache entry {entry} is unusable: {why}; "
                    "it was removed and the kernel is rebuilt",
                    KernelCacheWarning,
                    stacklevel=3,
                )
                _discard(entry, root)
            else:
                stats.hits += 1
                return artifact
        stats.misses += 1
        artifact = build()
        try:
            _publish(entry, root, key, func, out_idx, artifact, manifest)
        except Exception as exc:  # a cache that cannot store must not fail the compile
            warnings.warn(
                f"could not store kernel {artifact.entry_name} in the cache {root}: {exc}",
                KernelCacheWarning,
                stacklevel=3,
            )
            return artifact
        # Run what the cache now holds, as every later process will. For the CPU backend this
        # also halves a cold compile: saving emitted the machine code once (the shared library),
        # and loading the built module would have generated it a second time in LLVM's JIT.
        try:
            return _read_entry(entry, key, target, manifest)
        except _Unusable:
            return artifact
    finally:
        lock.__exit__(None, None, None)
