"""Typed environment variables: the mechanism, and the ones tile-layout reads.

Every tile package declares the environment variables it reads in one module
(``tile.<pkg>.env``) as ``EnvVar`` objects, never by calling ``os.environ`` ad hoc.
The mechanism lives here because tile-layout is the root of the dependency tree.

Example::

    >>> import os
    >>> from tile.layout.env import EnvVar
    >>> DEMO = EnvVar("TILE_DEMO_LEVEL", int, 3, "how loud the demo is")
    >>> DEMO.get()
    3
    >>> os.environ["TILE_DEMO_LEVEL"] = "5"; DEMO.get()
    5
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import EnvironmentVariableError

T = TypeVar("T")

_REGISTRY: dict[str, EnvVar[object]] = {}


def parse_bool(text: str) -> bool:
    """Parse the usual spellings of a boolean flag."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected one of 1/0/true/false/yes/no/on/off, got {text!r}")


class EnvVar(Generic[T]):
    """One declared environment variable with a parser, a default and a description."""

    def __init__(
        self, name: str, parse: Callable[[str], T], default: T, description: str
    ) -> None:
        self.name = name
        self.parse = parse
        self.default = default
        self.description = description
        _REGISTRY[name] = self  # type: ignore[assignment]

    def is_set(self) -> bool:
        """Whether the variable is present in the environment."""
        return self.name in os.environ

    def get(self) -> T:
        """The parsed value, or the default when unset.

        Raises:
            EnvironmentVariableError: the value does not parse.
        """
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        try:
            return self.parse(raw)
        except ValueError as exc:
            raise EnvironmentVariableError(
                f"environment variable {self.name}={raw!r} is malformed: {exc}",
                hint=f"{self.name}: {self.description}",
            ) from exc

    def __repr__(self) -> str:
        return f"EnvVar({self.name!r}, default={self.default!r})"


def declared() -> dict[str, EnvVar[object]]:
    """Every environment variable declared by the tile packages imported so far."""
    return dict(_REGISTRY)


MAX_ENUMERATE = EnvVar(
    "TILE_LAYOUT_MAX_ENUMERATE",
    int,
    1 << 20,
    "largest number of points a layout check, dump or plot enumerates point by point",
)
