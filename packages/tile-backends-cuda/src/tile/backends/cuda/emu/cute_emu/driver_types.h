// Host stand-in (TILE_DEVICE=emu, T.gemm impl="cute" only): CUTLASS's host adapter declares
// functions taking a stream; nothing here launches work.
#pragma once
#include "cuda_runtime.h"

typedef struct tile_simt_cute_stream* cudaStream_t;
