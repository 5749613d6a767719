// cuda_fp8.h for the SIMT emulator: the CUDA dialect comes from tile_simt_cuda.h.
#pragma once
#include "tile_simt_cuda.h"
