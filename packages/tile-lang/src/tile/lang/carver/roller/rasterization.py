"""Block visiting orders a hint may recommend (TileLang's ``carver.roller.rasterization``)."""

from ..._src.carver_templates import NoRasterization as NoRasterization
from ..._src.carver_templates import Rasterization2DRow as Rasterization2DRow
