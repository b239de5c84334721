// Error checks shared by the sources: each failed call throws minitensor::Error.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "minitensor/minitensor.hpp"

namespace minitensor::detail {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Makes `device` current for the scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

void launch_fill(float* data, size_t n, float value);
void launch_add(float* data, const float* other, size_t n);

}  // namespace minitensor::detail
