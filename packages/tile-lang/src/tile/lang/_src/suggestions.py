""""did you mean" for misspelled ``T.*`` names and keyword arguments.

Candidates are computed when the mistake happens, from the module's public names
or the callee's signature, so names other parts of tile add later are suggested
without a list to keep in sync.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from tile.layout.errors import did_you_mean

from ..errors import UnknownKeywordError, UnknownNameError

LANGUAGE_MODULES = ("tile.lang.language", "tile.lang.language.expert")
"""Modules users reach as ``T``: their public callables are matched to keyword errors."""


def _public_names(module_name: str) -> list[str]:
    module = sys.modules.get(module_name)
    return [n for n in dir(module) if not n.startswith("_")] if module is not None else []


def missing_name_hook(module_name: str, alias: str = "T.") -> Callable[[str], Any]:
    """A module ``__getattr__`` raising ``UnknownNameError`` with the closest public names."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # import machinery and tools probing dunders
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        hint = did_you_mean(name, _public_names(module_name), prefix=alias)
        raise UnknownNameError(
            f"`{alias}{name}` is not part of the tile language ({module_name})",
            hint=hint or f"see `dir({module_name})` for the names {alias}* provides",
        )

    return __getattr__


_UNEXPECTED_KEYWORD = re.compile(r"^(?P<func>[\w.<>]+)\(\) got an unexpected keyword argument '(?P<kw>\w+)'")


def _callables_named(qualname: str) -> Iterable[tuple[str, Any]]:
    for module_name in LANGUAGE_MODULES:
        module = sys.modules.get(module_name)
        for name in _public_names(module_name):
            value = getattr(module, name, None)
            target = value.__init__ if inspect.isclass(value) else value
            if getattr(target, "__qualname__", None) == qualname:
                yield name, value


def unknown_keyword(exc: TypeError, called: str | None = None) -> UnknownKeywordError | None:
    """An ``UnknownKeywordError`` for Python's "unexpected keyword argument" ``TypeError``
    from a ``T.*`` call, naming the parameters it does take; ``None`` for other errors.

    ``called`` is the name the kernel wrote (``reduce_sum``), which picks among public
    names sharing one implementation."""
    match = _UNEXPECTED_KEYWORD.match(str(exc))
    if match is None:
        return None
    keyword = match["kw"]
    found = sorted(_callables_named(match["func"]), key=lambda item: item[0] != called)
    for name, value in found:
        try:
            params = [
                p.name
                for p in inspect.signature(value).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            ]
        except (TypeError, ValueError):
            continue
        hint = did_you_mean(keyword, params) or f"T.{name} takes: {', '.join(params)}"
        return UnknownKeywordError(f"T.{name} got an unknown keyword argument {keyword!r}", hint=hint)
    return None


def check_keywords(api: str, given: Iterable[str], accepted: Iterable[str]) -> None:
    """Raise ``UnknownKeywordError`` for the first of ``given`` that is not ``accepted``."""
    known = list(accepted)
    for keyword in given:
        if keyword not in known:
            hint = did_you_mean(keyword, known) or f"{api} takes: {', '.join(sorted(known))}"
            raise UnknownKeywordError(f"{api} got an unknown keyword argument {keyword!r}", hint=hint)
