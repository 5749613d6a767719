// The native launch path of tile's GPU layer (tile/ir/gpu/native_launch.py builds and loads it).
//
// One call does what a kernel call with a known argument signature needs: it finds the launch
// plan whose signature the arguments have (the plans are made in Python; the layout of TileTable,
// TilePlan and TileArgSpec below is mirrored there with ctypes), allocates the outputs from the
// caller's allocator (torch's caching allocator, which apache-tvm-ffi installs for the call),
// packs the kernel parameters on the stack and calls the vendor's launch function (cuLaunchKernel
// or hipModuleLaunchKernel: the same signature) on the caller's current stream (torch's current
// stream of the tensors' device, which tvm-ffi installs for the call as well).
//
// The parameters live on this call's stack (the driver copies them at launch), so calls share
// no parameter storage and need no lock; a call writes only the table's `last` index and its
// thread's pending outputs. Python writes the plans, but only under the GIL, which this function
// holds throughout (it is called with release_gil off), and in an order that leaves every state
// a call can observe consistent.
//
//   tile_gpu_call(table_address, *inputs) -> the (first) output tensor, or None (no output)
//                                          | 1 (miss: no plan has this signature; nothing ran)
//                                          | -status (the launch failed; table->last names the plan)
#include <tvm/ffi/any.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int64_t kMiss = 1;
constexpr int kMaxDims = 8;
constexpr int kMaxParams = 64;
constexpr int kMaps = 4;
constexpr int kMaxPlans = 256;
constexpr int kMaxOutputs = 8;

// The outputs after the first of this thread's last launch, last first (tile_gpu_take).
thread_local std::vector<tvm::ffi::Tensor> pending;

enum ArgKind : int32_t {
  kTensor = 0,       // a tensor argument: its data pointer goes into parameter `slot`
  kOutput = 1,       // the output: allocated here, its data pointer goes into parameter `slot`
  kIntScalar = 2,    // a Python int written into parameter `slot`
  kBoolScalar = 3,   // a Python bool written into parameter `slot`
  kFloatScalar = 4,  // a Python float written into parameter `slot`
};

enum HolderCode : int32_t { kI32 = 0, kI64 = 1, kF32 = 2, kF64 = 3 };

struct TileArgSpec {
  int32_t kind;
  int32_t ndim;
  int32_t dtype_code, dtype_bits, dtype_lanes;
  int32_t device_type, device_id;
  int32_t holder_code;  // the C type of a scalar's parameter
  int32_t valued;       // a scalar the launch dims read: it must equal expect_i / expect_f
  int32_t slot;         // the kernel parameter it feeds (-1: none)
  int32_t map_slot;     // the by-value parameter (a TMA map) encoded from its pointer (-1: none)
  int32_t pad;
  int64_t shape[kMaxDims];
  int64_t align;
  int64_t expect_i;
  double expect_f;
  // The maps encoded so far for map_slot: map_addr[k] is the map for data pointer map_ptr[k].
  // Python fills a slot as map_ptr = 0, map_addr = new, map_ptr = new; a pointer with no map
  // here is a miss (Python encodes it).
  uint64_t map_ptr[kMaps];
  uint64_t map_addr[kMaps];
};

using LaunchFn = int (*)(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned shared, void* stream, void** params, void** extra);
using QueryFn = int (*)(void* out);

struct TilePlan {
  int32_t nargs;    // specs: every kernel-call argument in parameter order, the output included
  int32_t ninputs;  // the call's arguments (the output left out)
  int32_t nparams;  // kernel parameters
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
  int32_t device_type, device_id;  // where the tensors live: the stream's device
  int32_t pad;
  void** constants;  // the Python plan's parameter array: the slots no argument feeds
};

struct TileTable {
  int32_t count;  // plans[0, count) are live; Python writes plans[count] before raising count
  int32_t last;   // the plan the last call matched (tried first), or whose launch failed
  TilePlan* plans[kMaxPlans];
};

// The DLTensor behind a tensor argument, or null.
const DLTensor* as_tensor(const tvm::ffi::AnyView& value) {
  const DLTensor* t = value.as<DLTensor*>().value_or(nullptr);
  if (t != nullptr) return t;
  return value.as<tvm::ffi::TensorObj>();
}

bool contiguous(const DLTensor* t) {
  if (t->strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expected) return false;
    expected *= t->shape[i];
  }
  return true;
}

// Whether `t` has the spec's dtype, shape, device and contiguity; its data address in `*address`.
bool tensor_matches(const DLTensor* t, const TileArgSpec& spec, uint64_t* address) {
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

// Writes a scalar argument into `out` as its parameter's C type; false: not the spec's scalar.
bool scalar_value(const tvm::ffi::AnyView& value, const TileArgSpec& spec, uint64_t* out) {
  const int32_t index = value.type_index();
  double f = 0;
  int64_t i = 0;
  if (spec.kind == kFloatScalar) {
    if (index != kTVMFFIFloat) return false;
    f = value.as<double>().value();
    if (spec.valued && f != spec.expect_f) return false;
  } else {
    if (spec.kind == kIntScalar && index == kTVMFFIInt) {
      i = value.as<int64_t>().value();
    } else if (spec.kind == kBoolScalar && index == kTVMFFIBool) {
      i = value.as<bool>().value() ? 1 : 0;
    } else {
      return false;
    }
    if (spec.valued && i != spec.expect_i) return false;
    f = static_cast<double>(i);
  }
  *out = 0;
  switch (spec.holder_code) {
    case kI32: {
      if (spec.kind == kFloatScalar) return false;
      const int32_t v = static_cast<int32_t>(i);
      std::memcpy(out, &v, sizeof v);
      return true;
    }
    case kI64:
      if (spec.kind == kFloatScalar) return false;
      std::memcpy(out, &i, sizeof i);
      return true;
    case kF32: {
      const float v = static_cast<float>(f);
      std::memcpy(out, &v, sizeof v);
      return true;
    }
    case kF64:
      std::memcpy(out, &f, sizeof f);
      return true;
    default:
      return false;
  }
}

// The kernel parameters of one call, on the stack.
struct Packed {
  void* params[kMaxParams];
  uint64_t values[kMaxParams];
};

// The map encoded for data pointer `address` into the spec's by-value parameter, if it has one;
// false: a pointer without its map (Python encodes it, then calls with it find it here).
bool pack_map(const TileArgSpec& spec, uint64_t address, Packed* packed) {
  if (spec.map_slot < 0) return true;
  for (int m = 0; m < kMaps; ++m) {
    if (spec.map_ptr[m] == address && address != 0) {
      packed->params[spec.map_slot] = reinterpret_cast<void*>(spec.map_addr[m]);
      return true;
    }
  }
  return false;
}

// Whether `args` (the call's inputs) have `plan`'s signature; if so their parameters in `packed`
// (the output's slot is written after it is allocated).
bool pack(const TilePlan& plan, const tvm::ffi::AnyView* args, int32_t count, Packed* packed) {
  if (count != plan.ninputs) return false;
  std::memcpy(packed->params, plan.constants, sizeof(void*) * static_cast<size_t>(plan.nparams));
  int32_t input = 0;
  for (int32_t k = 0; k < plan.nargs; ++k) {
    const TileArgSpec& spec = plan.args[k];
    if (spec.kind == kOutput) continue;
    const tvm::ffi::AnyView& value = args[input++];
    uint64_t word = 0;
    if (spec.kind == kTensor) {
      const DLTensor* t = as_tensor(value);
      if (t == nullptr || !tensor_matches(t, spec, &word)) return false;
      if (!pack_map(spec, word, packed)) return false;
    } else if (!scalar_value(value, spec, &word)) {
      return false;
    }
    if (spec.slot >= 0) {
      packed->values[spec.slot] = word;
      packed->params[spec.slot] = &packed->values[spec.slot];
    }
  }
  return true;
}

int select(const TilePlan& plan, uint64_t scope) {
  if (plan.scope_bytes == 4) return reinterpret_cast<int (*)(int)>(plan.select)(static_cast<int>(scope));
  return reinterpret_cast<int (*)(void*)>(plan.select)(reinterpret_cast<void*>(scope));
}

// The launch in the device's scope (CUDA context, HIP device): a caller in another scope gets
// it selected for the launch and its own back after. 0, a driver status, or kMiss when the
// scope could not be asked or set (the Python path then tries, and names what fails).
int64_t launch(const TilePlan& plan, Packed* packed) {
  uint64_t current = plan.scope;
  if (plan.query != nullptr) {
    current = 0;
    if (reinterpret_cast<QueryFn>(plan.query)(&current) != 0) return kMiss;
    if (plan.scope_bytes == 4) current &= 0xffffffffull;
    if (current != plan.scope && select(plan, plan.scope) != 0) return kMiss;
  }
  void* stream = TVMFFIEnvGetStream(plan.device_type, plan.device_id);
  const int status = reinterpret_cast<LaunchFn>(plan.launch)(
      plan.function, plan.grid[0], plan.grid[1], plan.grid[2], plan.block[0], plan.block[1], plan.block[2],
      plan.shared, stream, packed->params, nullptr);
  if (current != plan.scope) select(plan, current);
  return status == 0 ? 0 : -static_cast<int64_t>(status);
}

void call(const tvm::ffi::AnyView* args, int32_t count, tvm::ffi::Any* result) {
  *result = kMiss;
  if (count < 1) return;
  auto* table = reinterpret_cast<TileTable*>(args[0].as<int64_t>().value_or(0));
  if (table == nullptr) return;
  const tvm::ffi::AnyView* inputs = args + 1;
  Packed packed;
  const int32_t plans = table->count;
  int32_t found = -1;
  // the last call's plan first: back-to-back calls with one signature check one plan
  if (table->last >= 0 && table->last < plans && pack(*table->plans[table->last], inputs, count - 1, &packed)) {
    found = table->last;
  }
  for (int32_t p = 0; found < 0 && p < plans; ++p) {
    if (p != table->last && pack(*table->plans[p], inputs, count - 1, &packed)) found = p;
  }
  if (found < 0) return;
  table->last = found;
  const TilePlan& plan = *table->plans[found];
  tvm::ffi::Tensor outputs[kMaxOutputs];
  int32_t count_outputs = 0;
  for (int32_t k = 0; k < plan.nargs; ++k) {
    const TileArgSpec& spec = plan.args[k];
    if (spec.kind != kOutput) continue;
    // torch's caching allocator on the tensors' device, on its current stream (under CUDA-graph
    // capture, the graph's pool): what tvm-ffi installed for this call
    tvm::ffi::Tensor out = tvm::ffi::Tensor::FromEnvAlloc(
        TVMFFIEnvTensorAlloc, tvm::ffi::ShapeView(spec.shape, spec.ndim),
        DLDataType{static_cast<uint8_t>(spec.dtype_code), static_cast<uint8_t>(spec.dtype_bits),
                   static_cast<uint16_t>(spec.dtype_lanes)},
        DLDevice{static_cast<DLDeviceType>(spec.device_type), spec.device_id});
    if (spec.slot >= 0) {
      packed.values[spec.slot] = reinterpret_cast<uint64_t>(out.data_ptr()) + out.byte_offset();
      packed.params[spec.slot] = &packed.values[spec.slot];
    }
    if (count_outputs == kMaxOutputs) return;  // Python never plans more: a miss, nothing ran
    outputs[count_outputs++] = std::move(out);
  }
  const int64_t status = launch(plan, &packed);
  if (status != 0) {
    *result = status;
    return;
  }
  // The first output is the answer; tile_gpu_take hands out the others, in order (tvm-ffi
  // turns a returned tensor into a torch tensor, not the tensors inside a returned array).
  pending.clear();
  for (int32_t k = count_outputs - 1; k >= 1; --k) pending.push_back(std::move(outputs[k]));
  if (count_outputs > 0) {
    *result = std::move(outputs[0]);
  } else {
    *result = nullptr;
  }
}

}  // namespace

extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tile_gpu_call(void*, const TVMFFIAny* args, int32_t count,
                                                          TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  call(reinterpret_cast<const tvm::ffi::AnyView*>(args), count, reinterpret_cast<tvm::ffi::Any*>(result));
  TVM_FFI_SAFE_CALL_END();
}

// The next output of this thread's last tile_gpu_call after its first, or None. `anchor` (a
// torch tensor of the call) makes tvm-ffi hand the output back as a torch tensor.
extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tile_gpu_take(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  if (pending.empty()) {
    *reinterpret_cast<tvm::ffi::Any*>(result) = nullptr;
  } else {
    *reinterpret_cast<tvm::ffi::Any*>(result) = std::move(pending.back());
    pending.pop_back();
  }
  TVM_FFI_SAFE_CALL_END();
}

// The stream tvm-ffi installed for this call on the device of `tensor`; an error where it
// installed no tensor allocator (the Python side checks both once per device before a plan
// goes native: the stream must be the one torch calls current, the outputs torch's).
extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tile_gpu_env_stream(void*, const TVMFFIAny* args, int32_t count,
                                                                TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  const DLTensor* t = count == 1 ? as_tensor(*reinterpret_cast<const tvm::ffi::AnyView*>(args)) : nullptr;
  TVM_FFI_ICHECK(t != nullptr) << "tile_gpu_env_stream takes one tensor";
  TVM_FFI_ICHECK(TVMFFIEnvGetDLPackManagedTensorAllocator() != nullptr) << "no tensor allocator installed";
  *reinterpret_cast<tvm::ffi::Any*>(result) =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(TVMFFIEnvGetStream(t->device.device_type, t->device.device_id)));
  TVM_FFI_SAFE_CALL_END();
}

// The sizes of TileTable, TilePlan and TileArgSpec and the limits, as "table,plan,spec,dims,
// params,maps,plans,outputs": the Python side checks its ctypes mirror against them before the first call.
extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_tile_gpu_layout(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {
  TVM_FFI_SAFE_CALL_BEGIN();
  const size_t sizes[] = {sizeof(TileTable), sizeof(TilePlan), sizeof(TileArgSpec), kMaxDims, kMaxParams, kMaps,
                          kMaxPlans, kMaxOutputs};
  std::string layout;
  for (size_t size : sizes) layout += (layout.empty() ? "" : ",") + std::to_string(size);
  *reinterpret_cast<tvm::ffi::Any*>(result) = tvm::ffi::String(layout);
  TVM_FFI_SAFE_CALL_END();
}
