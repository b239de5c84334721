// NCCL: an all-reduce (sum) over every visible GPU, in one process.
#include <nccl.h>
#include <vector>
#include "common.h"
static const char* kTest = "nccl";

int main() {
  int count = 0;
  CHECK_CUDA(cudaGetDeviceCount(&count));
  if (count < 1) {
    printf("{\"test\": \"%s\", \"ok\": false, \"error\": \"no GPU\"}\n", kTest);
    return 1;
  }
  const size_t n = 1 << 16;
  std::vector<ncclComm_t> comms(count);
  std::vector<float*> buf(count);
  std::vector<cudaStream_t> streams(count);
  std::vector<int> devs(count);
  for (int d = 0; d < count; ++d) {
    devs[d] = d;
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaMalloc(&buf[d], n * sizeof(float)));
    std::vector<float> host(n, static_cast<float>(d + 1));
    CHECK_CUDA(cudaMemcpy(buf[d], host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaStreamCreate(&streams[d]));
  }
  ncclResult_t r = ncclCommInitAll(comms.data(), count, devs.data());
  if (r == ncclSuccess) {
    ncclGroupStart();
    for (int d = 0; d < count; ++d)
      ncclAllReduce(buf[d], buf[d], n, ncclFloat, ncclSum, comms[d], streams[d]);
    r = ncclGroupEnd();
  }
  float want = count * (count + 1) / 2.0f;
  int bad = 0;
  for (int d = 0; d < count && r == ncclSuccess; ++d) {
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaStreamSynchronize(streams[d]));
    std::vector<float> host(n);
    CHECK_CUDA(cudaMemcpy(host.data(), buf[d], n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) bad += host[i] != want;
  }
  int version = 0;
  ncclGetVersion(&version);
  bool ok = r == ncclSuccess && bad == 0;
  printf("{\"test\": \"%s\", \"ok\": %s, \"version\": %d, \"gpus\": %d, \"mismatches\": %d%s%s%s}\n", kTest,
         ok ? "true" : "false", version, count, bad, r == ncclSuccess ? "" : ", \"error\": \"",
         r == ncclSuccess ? "" : ncclGetErrorString(r), r == ncclSuccess ? "" : "\"");
  for (int d = 0; d < count && r == ncclSuccess; ++d) ncclCommDestroy(comms[d]);
  return ok ? 0 : 1;
}
