"""User hooks on generated device source: ``hook(source, target) -> source``.

A GPU backend passes the device source it generated (``"cuda"``, ``"hip"``) through the hook
registered for that language, if any, before it compiles it or the emulator runs it; the
kernel's stored source is the hook's result. Front ends register hooks
(``tile.lang.engine.callback``, TileLang's postproc callbacks) and key their kernel caches
on :func:`hook_fingerprints`, so a changed hook gives a new kernel.

Example::

    >>> from tile.ir.target import Target
    >>> set_source_hook("cuda", lambda code, target: "// tuned\\n" + code)
    >>> postprocess_source("cuda", "__global__ void k() {}", Target(kind="cuda", arch="sm_80"))
    '// tuned\\n__global__ void k() {}'
    >>> set_source_hook("cuda", None)
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..errors import BackendError
from ..target import Target

SourceHook = Callable[[str, Target], str]

LANGUAGES = ("cuda", "hip")
"""The device languages a hook may be registered for."""

_hooks: dict[str, SourceHook] = {}
_lock = threading.Lock()


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise BackendError(
            f"no device source in language {language!r} to post-process",
            hint=f"register the hook for one of {', '.join(LANGUAGES)}",
        )


def set_source_hook(language: str, hook: SourceHook | None) -> None:
    """Post-process every ``language`` source generated from now on with ``hook`` (``None``
    removes it). One hook per language: a new one replaces the old."""
    _check_language(language)
    with _lock:
        if hook is None:
            _hooks.pop(language, None)
        else:
            _hooks[language] = hook


def source_hook(language: str) -> SourceHook | None:
    """The hook registered for ``language``, or ``None``."""
    _check_language(language)
    with _lock:
        return _hooks.get(language)


def postprocess_source(language: str, source: str, target: Target) -> str:
    """``source`` through the hook of ``language`` (unchanged when none is registered)."""
    hook = source_hook(language)
    if hook is None:
        return source
    result = hook(source, target)
    if not isinstance(result, str):
        name = getattr(hook, "__qualname__", type(hook).__name__)
        raise BackendError(
            f"the {language} source hook {name} returned {type(result).__name__}, not the source text",
            hint="a post-processing callback takes (code, target) and returns the new code as a str",
        )
    return result


def _code_digest(code: Any, digest: Any) -> None:
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if inspect.iscode(const):
            _code_digest(const, digest)
        else:
            digest.update(repr(const).encode())


def callable_fingerprint(fn: Callable[..., Any]) -> str:
    """What identifies a function's behaviour: a digest of its bytecode, names and constants
    (nested functions included), so moving it to another line or file keeps it; the
    qualified name for callables without Python code (builtins, ufuncs). What the function
    captures is not part of it."""
    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', type(target).__name__)}"
    digest = hashlib.sha256(sys.version.encode())
    _code_digest(code, digest)
    return digest.hexdigest()


def hook_fingerprints() -> dict[str, str]:
    """``callable_fingerprint`` of each registered hook, by language; empty when none is."""
    with _lock:
        hooks = dict(_hooks)
    return {language: callable_fingerprint(hook) for language, hook in sorted(hooks.items())}
