// Host stand-in (TILE_DEVICE=emu, T.gemm impl="cute" only): the emulator's CUDA dialect
// defines the vector types CUTLASS's platform.h expects from here.
#pragma once
#include "cuda_runtime.h"
