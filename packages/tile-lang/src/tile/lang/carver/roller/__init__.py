"""TileLang's ``carver.roller`` names: the ``Hint`` a template recommends."""

from ..._src.carver_templates import Hint as Hint
from . import rasterization as rasterization
