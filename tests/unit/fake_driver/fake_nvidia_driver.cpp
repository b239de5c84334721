// A stand-in for the driver's libcuda.so and libnvidia-ml.so in the unit
// tests of verify/driver_query.cpp: the few entry points stackbuild calls,
// answering from environment variables so one build serves every case.
//   FAKE_CUDA_DRIVER_VERSION  cuDriverGetVersion's answer (12040); unset: fails
//   FAKE_NVML_BRAND           nvmlDeviceGetBrand's (2 = tesla); unset: fails
//   FAKE_NVML_CC              the compute capability, "9.0"; unset: fails
//   FAKE_NVML_UUID            the one UUID nvmlDeviceGetHandleByUUID knows,
//                             and nvmlDeviceGetUUID's answer
//   FAKE_NVML_NAME            nvmlDeviceGetName's; unset: fails
//   FAKE_NVML_CRASH, FAKE_NVML_HANG  nvmlInit_v2 crashes, or never returns
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int device_token = 0;

const char* var(const char* name) {
  return std::getenv(name);
}

}  // namespace

extern "C" {

int cuDriverGetVersion(int* version) {
  const char* v = var("FAKE_CUDA_DRIVER_VERSION");
  if (!v) return 3;  // CUDA_ERROR_NOT_INITIALIZED
  *version = std::atoi(v);
  return 0;
}

int nvmlInit_v2() {
  if (var("FAKE_NVML_CRASH")) std::raise(SIGSEGV);
  if (var("FAKE_NVML_HANG")) pause();
  return 0;
}

int nvmlShutdown() {
  return 0;
}

int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  const char* known = var("FAKE_NVML_UUID");
  if (!known || std::strcmp(uuid, known) != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *device = &device_token;
  return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char*, void** device) {
  *device = &device_token;
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned, void** device) {
  *device = &device_token;
  return 0;
}

int nvmlDeviceGetBrand(void*, int* brand) {
  const char* b = var("FAKE_NVML_BRAND");
  if (!b) return 3;  // NVML_ERROR_NOT_SUPPORTED
  *brand = std::atoi(b);
  return 0;
}

int nvmlDeviceGetCudaComputeCapability(void*, int* major, int* minor) {
  const char* cc = var("FAKE_NVML_CC");
  if (!cc || std::sscanf(cc, "%d.%d", major, minor) != 2) return 3;
  return 0;
}

int nvmlDeviceGetName(void*, char* name, unsigned length) {
  const char* n = var("FAKE_NVML_NAME");
  if (!n || std::strlen(n) >= length) return 3;
  std::strcpy(name, n);
  return 0;
}

int nvmlDeviceGetUUID(void*, char* uuid, unsigned length) {
  const char* u = var("FAKE_NVML_UUID");
  if (!u || std::strlen(u) >= length) return 3;
  std::strcpy(uuid, u);
  return 0;
}

}  // extern "C"
