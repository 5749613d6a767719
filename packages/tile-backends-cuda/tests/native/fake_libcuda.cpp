// A stand-in for libcuda with the entry points tile's launcher calls, for host-side tests:
// every call is answered like the driver would and recorded, so a test sees what ctypes
// really passed (widths, pointers, the kernel-parameter array). Nothing runs on a GPU.
#include <cstdint>
#include <cstring>

namespace {
thread_local void* current_context = nullptr;
thread_local int current_device = 7;
int launch_status = 0;
int last_set_attribute = -1;
char loaded_image[8] = {0};
char function_name[64] = {0};
uint64_t last_launch[16] = {0};  // grid xyz, block xyz, shared, stream, context, params[0..6]
int launches = 0;
int param_widths[7] = {8, 8, 4, 4, 0, 0, 0};  // bytes read from each kernel parameter; 0: stop
void* const kContextBase = reinterpret_cast<void*>(0x1000);
}  // namespace

extern "C" {
int cuInit(unsigned int) { return 0; }
int cuDeviceGet(int* device, int ordinal) { *device = ordinal; return 0; }
int cuDevicePrimaryCtxRetain(void** context, int device) {
  *context = static_cast<char*>(kContextBase) + device;
  return 0;
}
int cuCtxGetCurrent(void** context) { *context = current_context; return 0; }
int cuCtxSetCurrent(void* context) { current_context = context; return 0; }
int cuModuleLoadData(void** module, const void* image) {
  std::memcpy(loaded_image, image, sizeof(loaded_image));
  *module = reinterpret_cast<void*>(0x2000);
  return 0;
}
int cuModuleGetFunction(void** function, void*, const char* name) {
  std::strncpy(function_name, name, sizeof(function_name) - 1);
  *function = reinterpret_cast<void*>(0x3000);
  return 0;
}
int cuFuncGetAttribute(int* value, int attribute, void*) { *value = attribute == 1 ? 64 : 0; return 0; }
int cuFuncSetAttribute(void*, int, int value) { last_set_attribute = value; return 0; }
int record_launch(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  unsigned shared, void* stream, void** params, void** extra, uint64_t scope) {
  if (function != reinterpret_cast<void*>(0x3000) || extra != nullptr) return 1;
  uint64_t head[] = {gx, gy, gz, bx, by, bz, shared, reinterpret_cast<uint64_t>(stream), scope};
  std::memcpy(last_launch, head, sizeof(head));
  for (int i = 0; i < 7; ++i) last_launch[9 + i] = 0;
  for (int i = 0; i < 7 && param_widths[i] > 0; ++i) std::memcpy(&last_launch[9 + i], params[i], param_widths[i]);
  ++launches;
  return launch_status;
}
int cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  return record_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra,
                       reinterpret_cast<uint64_t>(current_context));
}
// HIP's kind of scope, a current device index per thread (the launch records it where CUDA's
// records the context), for launchers whose scope is 4 bytes wide
int hipGetDevice(int* device) { *device = current_device; return 0; }
int hipSetDevice(int device) { current_device = device; return 0; }
int hipModuleLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  return record_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra,
                       static_cast<uint64_t>(current_device));
}
int cuGetErrorName(int, const char** name) { *name = "CUDA_ERROR_FAKE"; return 0; }

// what the test reads back
void fake_set_launch_status(int status) { launch_status = status; }
void fake_set_param_widths(const int* widths, int count) {
  for (int i = 0; i < 7; ++i) param_widths[i] = i < count ? widths[i] : 0;
}
int fake_launches() { return launches; }
int fake_last_set_attribute() { return last_set_attribute; }
const char* fake_function_name() { return function_name; }
const char* fake_loaded_image() { return loaded_image; }
void fake_last_launch(uint64_t* out) { std::memcpy(out, last_launch, sizeof(last_launch)); }
void* fake_current_context() { return current_context; }
}
