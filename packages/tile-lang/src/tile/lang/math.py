"""``tile.lang.math`` (TileLang's ``tilelang.math``): integer helpers programs call on the host
while choosing tile sizes (``block_T = min(128, tilelang.math.next_power_of_2(dim))``)."""

from ._src.math import cdiv as cdiv
from ._src.math import next_power_of_2 as next_power_of_2

__all__ = ["cdiv", "next_power_of_2"]
