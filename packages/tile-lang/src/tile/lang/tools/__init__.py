"""``tile.lang.tools`` (TileLang's ``tilelang.tools``): ``Analyzer``, the FLOPs and global-memory
bytes a tile program names."""

from .._src.analyzer import AnalysisError as AnalysisError
from .._src.analyzer import AnalysisResult as AnalysisResult
from .._src.analyzer import Analyzer as Analyzer

__all__ = ["AnalysisError", "AnalysisResult", "Analyzer"]
