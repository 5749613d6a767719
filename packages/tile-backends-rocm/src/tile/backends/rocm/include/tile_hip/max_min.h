// tile_hip/max_min.h: tile::max and tile::min (TVM's T.max, T.min) for the HIP device header
// and its emulated variant alike; each adds its own half overloads. Both operands have one
// type (TIR's Max/Min require it). Floats follow fmaxf/fminf (a NaN operand loses), as CUDA's
// max/min do. The others are `b < a ? a : b` (`a < b ? a : b` for min), as TVM's CUDA half max:
// a NaN first operand loses, which the reductions rely on (they pass the new value first, so a
// NaN value never replaces the accumulator: tile/ir/ops/reduce.py). The including header
// defines TILE_DEVICE and tile_bf16 first.
#pragma once

namespace tile {

template <typename T>
TILE_DEVICE T max(T a, T b) { return b < a ? a : b; }
template <typename T>
TILE_DEVICE T min(T a, T b) { return a < b ? a : b; }
TILE_DEVICE float max(float a, float b) { return fmaxf(a, b); }
TILE_DEVICE float min(float a, float b) { return fminf(a, b); }
TILE_DEVICE double max(double a, double b) { return fmax(a, b); }
TILE_DEVICE double min(double a, double b) { return fmin(a, b); }
TILE_DEVICE tile_bf16 max(tile_bf16 a, tile_bf16 b) { return (float)b < (float)a ? a : b; }
TILE_DEVICE tile_bf16 min(tile_bf16 a, tile_bf16 b) { return (float)a < (float)b ? a : b; }

}  // namespace tile
