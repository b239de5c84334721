// The library's own GPU code: the only file nvcc compiles, for the archs in
// MINITENSOR_GENCODE (see the Makefile).
#include "check.hpp"

namespace minitensor::detail {

namespace {

__global__ void fill_kernel(float* data, size_t n, float value) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] = value;
}

__global__ void add_kernel(float* data, const float* other, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] += other[i];
}

unsigned blocks(size_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void launch_fill(float* data, size_t n, float value) {
  if (n == 0) return;
  fill_kernel<<<blocks(n), 256>>>(data, n, value);
  check_cuda(cudaGetLastError(), "fill kernel");
}

void launch_add(float* data, const float* other, size_t n) {
  if (n == 0) return;
  add_kernel<<<blocks(n), 256>>>(data, other, n);
  check_cuda(cudaGetLastError(), "add kernel");
}

}  // namespace minitensor::detail
