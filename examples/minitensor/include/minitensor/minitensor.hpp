// minitensor: a small CUDA tensor library, the example framework stackbuild
// compiles inside an image (examples/minitensor.yaml). A Tensor is a dense
// float32 array on one GPU, row-major; matmul goes through cuBLAS, conv2d
// through cuDNN, all-reduce through NCCL.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace minitensor {

// Thrown for every failed CUDA, cuBLAS, cuDNN or NCCL call, with its name.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::vector<int> shape, int device = 0);  // uninitialised device memory
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  static Tensor from_host(const std::vector<float>& data, std::vector<int> shape, int device = 0);
  std::vector<float> to_host() const;

  void fill(float value);                  // a CUDA kernel (src/kernels.cu)
  void add_(const Tensor& other);          // this += other, elementwise (a kernel)

  const std::vector<int>& shape() const { return shape_; }
  size_t numel() const;
  int device() const { return device_; }
  float* data() { return data_; }
  const float* data() const { return data_; }

 private:
  std::vector<int> shape_;
  int device_ = 0;
  float* data_ = nullptr;
};

// C = A B for A [m, k] and B [k, n] (cuBLAS SGEMM).
Tensor matmul(const Tensor& a, const Tensor& b);

// Cross-correlation of x [n, c, h, w] with w [k, c, r, s], stride 1, zero
// padding `pad` (cuDNN, implicit GEMM).
Tensor conv2d(const Tensor& x, const Tensor& w, int pad = 0);

// Sums the tensors elementwise in place, one per GPU (tensors[i] on device
// i), with NCCL in a single process (ncclCommInitAll).
void all_reduce_sum(std::vector<Tensor>& tensors);

// The number of GPUs the CUDA runtime sees (0 without a driver or a GPU).
int device_count();

// The compute capabilities this library was compiled for, as "sm_80 sm_90".
std::string compiled_archs();

}  // namespace minitensor
