// cuBLAS: a single-precision GEMM checked against a CPU result.
#include <cublas_v2.h>
#include <vector>
#include "common.h"
static const char* kTest = "cublas";

int main() {
  const int n = 256;
  std::vector<float> a(n * n), b(n * n), c(n * n, 0.0f), ref(n * n, 0.0f);
  for (int i = 0; i < n * n; ++i) a[i] = (i % 13) * 0.25f - 1.0f, b[i] = (i % 7) * 0.5f - 1.5f;
  for (int col = 0; col < n; ++col)  // column-major, as cuBLAS
    for (int k = 0; k < n; ++k)
      for (int row = 0; row < n; ++row) ref[col * n + row] += a[k * n + row] * b[col * n + k];
  float *da, *db, *dc;
  CHECK_CUDA(cudaMalloc(&da, n * n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&db, n * n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dc, n * n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    printf("{\"test\": \"%s\", \"ok\": false, \"error\": \"cublasCreate failed\"}\n", kTest);
    return 1;
  }
  cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);  // no TF32: compare with full float precision
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n);
  CHECK_CUDA(cudaMemcpy(c.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < n * n; ++i) bad += !close_enough(c[i], ref[i], 1e-4f);
  int version = 0;
  cublasGetVersion(h, &version);
  bool ok = s == CUBLAS_STATUS_SUCCESS && bad == 0;
  printf("{\"test\": \"%s\", \"ok\": %s, \"version\": %d, \"n\": %d, \"mismatches\": %d}\n", kTest,
         ok ? "true" : "false", version, n, bad);
  cublasDestroy(h);
  return ok ? 0 : 1;
}
