// CUDA: the devices the runtime sees, their compute capability, and a kernel's
// result checked on the host.
#include "common.h"
static const char* kTest = "cuda";

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  int count = 0, runtime = 0, driver = 0;
  CHECK_CUDA(cudaGetDeviceCount(&count));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  const int n = 1 << 20;
  float *x, *y;
  CHECK_CUDA(cudaMallocManaged(&x, n * sizeof(float)));
  CHECK_CUDA(cudaMallocManaged(&y, n * sizeof(float)));
  for (int i = 0; i < n; ++i) x[i] = 1.0f + i % 7, y[i] = 2.0f;
  saxpy<<<(n + 255) / 256, 256>>>(n, 3.0f, x, y);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += !close_enough(y[i], 3.0f * (1.0f + i % 7) + 2.0f, 1e-6f);
  printf("{\"test\": \"%s\", \"ok\": %s, \"devices\": %d, \"runtime\": %d, \"driver\": %d, \"gpus\": [", kTest,
         bad == 0 && count > 0 ? "true" : "false", count, runtime, driver);
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p;
    CHECK_CUDA(cudaGetDeviceProperties(&p, d));
    printf("%s{\"name\": \"%s\", \"cc\": \"%d.%d\", \"memory_gib\": %.1f}", d ? ", " : "", p.name, p.major, p.minor,
           p.totalGlobalMem / 1073741824.0);
  }
  printf("], \"mismatches\": %d}\n", bad);
  return bad == 0 && count > 0 ? 0 : 1;
}
