// matmul through cuBLAS. cuBLAS is column-major: a row-major C = A B is the
// column-major C^T = B^T A^T, so B and A are passed in swapped order.
#include <cublas_v2.h>

#include "check.hpp"

namespace minitensor {

namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.shape().size() != 2 || b.shape().size() != 2 || a.shape()[1] != b.shape()[0])
    throw Error("matmul: want A [m, k] and B [k, n]");
  if (a.device() != b.device()) throw Error("matmul: A and B are on different devices");
  const int m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  Tensor c({m, n}, a.device());
  detail::DeviceGuard g(a.device());
  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b.data(), n, a.data(), k, &zero,
                                 c.data(), n);
  cublasDestroy(h);
  check(s, "cublasSgemm");
  return c;
}

}  // namespace minitensor
