"""``pass_configs``: per-kernel compiler switches, spelled as in TileLang.

``tile.lang.compile(func, target=..., pass_configs={PassConfigKey.X: value})`` hands
each switch to the backend as a target option named by the key (``"tl.disable_warp_specialized"``),
so a switch is part of the target, of the kernel cache key, and visible to the pass
pipeline, which is built from the target alone. Only keys some backend honours are
accepted; anything else is a ``TargetError`` that lists them, never a silently ignored
switch.

Example::

    >>> from tile.lang import PassConfigKey
    >>> PassConfigKey.TL_DISABLE_WARP_SPECIALIZED.value
    'tl.disable_warp_specialized'
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from tile.ir.errors import TargetError
from tile.ir.target import Target


class PassConfigKey(enum.StrEnum):
    """The ``pass_configs`` keys tile understands (TileLang's names and spellings)."""

    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    """True: sm_90a ``T.Pipelined`` loops keep the cp.async ring, no TMA producer warpgroup."""
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    """True: no TMA loads (on CUDA these come only with warp specialization, so that goes too)."""


_KNOWN = {key.value for key in PassConfigKey}


def _value_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise TargetError(
        f"pass config {key} = {value!r} is not a bool, int or string",
        hint=f"write pass_configs={{{key!r}: True}} or False",
    )


def apply_pass_configs(target: Target, configs: Any) -> Target:
    """``target`` with every ``pass_configs`` entry added as an option (see module docstring)."""
    if configs is None:
        return target
    if not isinstance(configs, Mapping):
        raise TargetError(
            f"pass_configs must be a dict, got {type(configs).__name__}",
            hint="write pass_configs={tile.lang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}",
        )
    options = dict(target.options)
    for raw_key, value in configs.items():
        key = raw_key.value if isinstance(raw_key, enum.Enum) else raw_key
        if not isinstance(key, str) or key not in _KNOWN:
            raise TargetError(
                f"unknown pass config {raw_key!r}",
                hint=f"the pass configs tile understands are {sorted(_KNOWN)} (tile.lang.PassConfigKey)",
            )
        text = _value_text(key, value)
        if options.get(key, text) != text:
            raise TargetError(
                f"pass config {key} = {text!r} contradicts the target's own {key} = {options[key]!r}",
                hint="set the switch in one place: pass_configs or the target dict",
            )
        options[key] = text
    return dataclasses.replace(target, options=tuple(sorted(options.items())))
