"""``tile.lang.language.tir``: where TileLang programs import TIR builtins from.

TileLang keeps the TVMScript builtins its ``T`` namespace re-exports in a ``tir``
subpackage (``tir.ir`` for expression builders, ``tir.op`` for intrinsics); programs
and tests import them from there. Here both are the same set: the TVMScript names
``T`` re-exports (``tile.lang._src.tir_builtins``), with TVM's own values.
"""

from . import ir as ir
from . import op as op

__all__ = ["ir", "op"]
