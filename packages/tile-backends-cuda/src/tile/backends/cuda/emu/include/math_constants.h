// math_constants.h for the SIMT emulator: the CUDA C++ dialect comes from the emulator's tile_simt_dialect.h.
#pragma once
#include "tile_simt_dialect.h"
