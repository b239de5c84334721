#include <numeric>
#include <utility>

#include "check.hpp"

namespace minitensor {

using detail::check_cuda;
using detail::DeviceGuard;

Tensor::Tensor(std::vector<int> shape, int device) : shape_(std::move(shape)), device_(device) {
  for (int d : shape_)
    if (d <= 0) throw Error("Tensor: every dimension must be positive");
  DeviceGuard g(device_);
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), numel() * sizeof(float)), "cudaMalloc");
}

Tensor::~Tensor() {
  if (data_) {
    cudaSetDevice(device_);
    cudaFree(data_);
  }
}

Tensor::Tensor(Tensor&& o) noexcept
    : shape_(std::move(o.shape_)), device_(o.device_), data_(std::exchange(o.data_, nullptr)) {}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  std::swap(shape_, o.shape_);
  std::swap(device_, o.device_);
  std::swap(data_, o.data_);
  return *this;
}

size_t Tensor::numel() const {
  return std::accumulate(shape_.begin(), shape_.end(), size_t{1},
                         [](size_t a, int d) { return a * static_cast<size_t>(d); });
}

Tensor Tensor::from_host(const std::vector<float>& data, std::vector<int> shape, int device) {
  Tensor t(std::move(shape), device);
  if (data.size() != t.numel()) throw Error("Tensor::from_host: the data does not match the shape");
  DeviceGuard g(device);
  check_cuda(cudaMemcpy(t.data_, data.data(), data.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  return t;
}

std::vector<float> Tensor::to_host() const {
  std::vector<float> out(numel());
  DeviceGuard g(device_);
  check_cuda(cudaMemcpy(out.data(), data_, out.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

void Tensor::fill(float value) {
  DeviceGuard g(device_);
  detail::launch_fill(data_, numel(), value);
}

void Tensor::add_(const Tensor& other) {
  if (other.shape_ != shape_ || other.device_ != device_) throw Error("add_: shapes or devices differ");
  DeviceGuard g(device_);
  detail::launch_add(data_, other.data_, numel());
}

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::string compiled_archs() { return MINITENSOR_ARCHS; }  // set by the Makefile

}  // namespace minitensor
