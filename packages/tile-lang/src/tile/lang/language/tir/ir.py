"""TIR expression builders as TileLang's ``tilelang.language.tir.ir`` exposes them (TVM's values)."""

from ..._src.builtins import CAST_ROUNDING_MODES
from ..._src.builtins import cast as cast
from ..._src.tir_builtins import *  # noqa: F403
from ..._src.tir_builtins import __all__ as _names

_VALID_CAST_ROUNDING_MODES = frozenset(CAST_ROUNDING_MODES)
"""The ``round=`` values ``T.cast`` accepts (TileLang's name for them)."""

__all__ = [*_names, "cast"]
