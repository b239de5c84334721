// Shared bits of the GPU test programs: each prints one JSON line
// {"test": ..., "ok": true|false, ...} and exits 0 only when the check held.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK_CUDA(call)                                                                      \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      printf("{\"test\": \"%s\", \"ok\": false, \"error\": \"%s: %s\"}\n", kTest, #call,       \
             cudaGetErrorString(e_));                                                         \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

static inline bool close_enough(float a, float b, float tol) {
  float d = a - b;
  if (d < 0) d = -d;
  float m = b < 0 ? -b : b;
  return d <= tol * (m > 1 ? m : 1);
}
