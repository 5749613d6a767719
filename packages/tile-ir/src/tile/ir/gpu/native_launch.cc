// The native launch path of tile's GPU layer (tile/ir/gpu/native_launch.py builds and loads it).
//
// One call checks a kernel call's arguments against a launch plan made in Python (the layout
// of TilePlan and TileArgSpec below is mirrored there with ctypes), writes the data pointers
// and scalars into the plan's kernel-parameter holders and calls the vendor's launch function
// (cuLaunchKernel or hipModuleLaunchKernel: the same signature) through a function pointer.
// Anything it does not handle (another signature, a by-value parameter to re-encode, the
// device's context not current) returns TILE_MISS and the Python path does the call instead.
//
//   tile_gpu_launch(plan_address, stream, *arguments) -> 0 (launched) | 1 (miss) | -status
#include <tvm/ffi/any.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <cstring>

namespace {

constexpr int64_t kLaunched = 0;
constexpr int64_t kMiss = 1;
constexpr int kMaxDims = 8;

enum ArgKind : int32_t {
  kTensor = 0,         // its data pointer goes into `holder`
  kTensorByValue = 1,  // a by-value parameter (a TMA map) packed for the data pointer `expect_ptr`
  kIntScalar = 2,      // a Python int (or bool) written into `holder`
  kFloatScalar = 3,    // a Python float written into `holder`
};

enum HolderCode : int32_t { kI32 = 0, kI64 = 1, kF32 = 2, kF64 = 3 };

struct TileArgSpec {
  int32_t kind;
  int32_t ndim;
  int32_t dtype_code, dtype_bits, dtype_lanes;
  int32_t device_type, device_id;
  int32_t holder_code;
  int32_t valued;  // a scalar the launch dims read: it must equal expect_i / expect_f
  int32_t pad;
  int64_t shape[kMaxDims];
  int64_t align;
  void* holder;
  int64_t expect_i;
  double expect_f;
  uint64_t expect_ptr;
};

using LaunchFn = int (*)(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned shared, void* stream, void** params, void** extra);
using QueryFn = int (*)(void* out);

struct TilePlan {
  int32_t nargs;
  int32_t scope_bytes;  // 8: a context pointer (CUDA), 4: a device index (HIP)
  TileArgSpec* args;
  void* function;
  void* launch;
  void* query;   // writes the thread's current scope; null: no scope
  void* select;  // makes a scope current: (CUcontext) or (int device)
  uint64_t scope;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared;
  uint32_t pad;
  void** params;
};

bool contiguous(const DLTensor* t) {
  if (t->strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expected) return false;
    expected *= t->shape[i];
  }
  return true;
}

// Whether `value` (a tensor) matches `spec`; its data address in `*address`.
bool tensor_matches(const tvm::ffi::AnyView& value, const TileArgSpec& spec, uint64_t* address) {
  const DLTensor* t = value.as<DLTensor*>().value_or(nullptr);
  if (t == nullptr) {
    const tvm::ffi::TensorObj* obj = value.as<tvm::ffi::TensorObj>();
    if (obj == nullptr) return false;
    t = obj;
  }
  if (t->ndim != spec.ndim || t->dtype.code != spec.dtype_code || t->dtype.bits != spec.dtype_bits ||
      t->dtype.lanes != spec.dtype_lanes || t->device.device_type != spec.device_type ||
      t->device.device_id != spec.device_id)
    return false;
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] != spec.shape[i]) return false;
    count *= t->shape[i];
  }
  if (!contiguous(t)) return false;
  *address = reinterpret_cast<uint64_t>(t->data) + t->byte_offset;
  return !(spec.align > 1 && count > 0 && *address % static_cast<uint64_t>(spec.align));
}

bool write_scalar(const tvm::ffi::AnyView& value, const TileArgSpec& spec) {
  const int32_t index = value.type_index();
  double f = 0;
  int64_t i = 0;
  if (spec.kind == kFloatScalar) {
    if (index != kTVMFFIFloat) return false;
    f = value.as<double>().value();
    if (spec.valued && f != spec.expect_f) return false;
  } else {
    if (index == kTVMFFIInt) {
      i = value.as<int64_t>().value();
    } else if (index == kTVMFFIBool) {
      i = value.as<bool>().value() ? 1 : 0;
    } else {
      return false;
    }
    if (spec.valued && i != spec.expect_i) return false;
    f = static_cast<double>(i);
  }
  const bool floating = spec.kind == kFloatScalar;
  switch (spec.holder_code) {
    case kI32: {
      if (floating) return false;
      const int32_t v = static_cast<int32_t>(i);
      std::memcpy(spec.holder, &v, sizeof v);
      return true;
    }
    case kI64:
      if (floating) return false;
      std::memcpy(spec.holder, &i, sizeof i);
      return true;
    case kF32: {
      const float v = static_cast<float>(f);
      std::memcpy(spec.holder, &v, sizeof v);
      return true;
    }
    case kF64:
      std::memcpy(spec.holder, &f, sizeof f);
      return true;
    default:
      return false;
  }
}

int select(const TilePlan* plan, uint64_t scope) {
  if (plan->scope_bytes == 4) return reinterpret_cast<int (*)(int)>(plan->select)(static_cast<int>(scope));
  return reinterpret_cast<int (*)(void*)>(plan->select)(reinterpret_cast<void*>(scope));
}

int64_t launch(const tvm::ffi::AnyView* args, int32_t count) {
  if (count < 2) return kMiss;
  const auto* plan = reinterpret_cast<const TilePlan*>(args[0].as<int64_t>().value_or(0));
  if (plan == nullptr || count - 2 != plan->nargs) return kMiss;
  void* stream = reinterpret_cast<void*>(args[1].as<int64_t>().value_or(0));
  for (int32_t k = 0; k < plan->nargs; ++k) {
    const TileArgSpec& spec = plan->args[k];
    const tvm::ffi::AnyView& value = args[k + 2];
    if (spec.kind == kTensor || spec.kind == kTensorByValue) {
      uint64_t address = 0;
      if (!tensor_matches(value, spec, &address)) return kMiss;
      if (spec.kind == kTensorByValue) {
        if (address != spec.expect_ptr) return kMiss;  // Python encodes the new value
      } else if (spec.holder != nullptr) {
        std::memcpy(spec.holder, &address, sizeof address);
      }
    } else if (!write_scalar(value, spec)) {
      return kMiss;
    }
  }
  // The launch runs in the device's scope (CUDA context, HIP device); a caller in another
  // scope gets it selected for the launch and its own back after, as the Python path does.
  uint64_t current = plan->scope;
  if (plan->query != nullptr) {
    current = 0;
    if (reinterpret_cast<QueryFn>(plan->query)(&current) != 0) return kMiss;
    if (plan->scope_bytes == 4) current &= 0xffffffffull;
    if (current != plan->scope && select(plan, plan->scope) != 0) return kMiss;
  }
  const int status = reinterpret_cast<LaunchFn>(plan->launch)(
      plan->function, plan->grid[0], plan->grid[1], plan->grid[2], plan->block[0], plan->block[1], plan->block[2],
      plan->shared, stream, plan->params, nullptr);
  if (current != plan->scope) select(plan, current);
  return status == 0 ? kLaunched : -static_cast<int64_t>(status);
}

}  // namespace

extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tile_gpu_launch(void*, const TVMFFIAny* args, int32_t count,
                                                            TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  const int64_t status = launch(reinterpret_cast<const tvm::ffi::AnyView*>(args), count);
  *reinterpret_cast<tvm::ffi::Any*>(result) = status;
  TVM_FFI_SAFE_CALL_END();
}

// sizeof(TilePlan), sizeof(TileArgSpec): the Python side checks its ctypes mirror against them.
extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tile_gpu_layout(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  *reinterpret_cast<tvm::ffi::Any*>(result) =
      static_cast<int64_t>(sizeof(TilePlan)) * 1000 + static_cast<int64_t>(sizeof(TileArgSpec));
  TVM_FFI_SAFE_CALL_END();
}
