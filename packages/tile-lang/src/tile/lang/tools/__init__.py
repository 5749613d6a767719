"""``tile.lang.tools`` (TileLang's ``tilelang.tools``): ``Analyzer``, the FLOPs and global-memory
bytes a tile program names; ``plot_layout``, a layout or fragment drawn as a grid."""

from .._src.analyzer import AnalysisError as AnalysisError
from .._src.analyzer import AnalysisResult as AnalysisResult
from .._src.analyzer import Analyzer as Analyzer
from .._src.plot_layout import PlotDependencyError as PlotDependencyError
from .._src.plot_layout import plot_layout as plot_layout

__all__ = ["AnalysisError", "AnalysisResult", "Analyzer", "PlotDependencyError", "plot_layout"]
