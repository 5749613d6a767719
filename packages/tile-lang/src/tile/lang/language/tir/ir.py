"""TIR expression builders as TileLang's ``tilelang.language.tir.ir`` exposes them (TVM's values)."""

from ..._src.tir_builtins import *  # noqa: F403
from ..._src.tir_builtins import __all__ as _names

__all__ = list(_names)
