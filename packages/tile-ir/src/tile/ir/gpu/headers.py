"""The device header every C++-dialect GPU vendor shares: ``include/tile_gpu.h``.

It defines the ``tile::`` entry points (vector copies, atomics, fast math, casts) that
read the same in the CUDA dialect for every vendor; a vendor's device header includes it,
and the vendor's compiler puts :data:`INCLUDE_DIR` on its include path after its own folder.
"""

from __future__ import annotations

import pathlib

INCLUDE_DIR = pathlib.Path(__file__).resolve().parent / "include"
"""The folder holding ``tile_gpu.h``."""
