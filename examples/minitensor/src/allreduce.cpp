// all-reduce through NCCL, one process driving every GPU (ncclCommInitAll).
#include <nccl.h>

#include "check.hpp"

namespace minitensor {

namespace {

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(std::string(what) + ": " + ncclGetErrorString(r));
}

}  // namespace

void all_reduce_sum(std::vector<Tensor>& ts) {
  const int n = static_cast<int>(ts.size());
  if (n == 0) return;
  std::vector<int> devices;
  for (int i = 0; i < n; ++i) {
    if (ts[i].device() != i) throw Error("all_reduce_sum: tensor i must be on device i");
    if (ts[i].shape() != ts[0].shape()) throw Error("all_reduce_sum: shapes differ");
    devices.push_back(i);
  }
  std::vector<ncclComm_t> comms(n);
  check(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll");
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < n && r == ncclSuccess; ++i) {
    detail::check_cuda(cudaSetDevice(i), "cudaSetDevice");
    r = ncclAllReduce(ts[i].data(), ts[i].data(), ts[i].numel(), ncclFloat, ncclSum, comms[i], nullptr);
  }
  ncclResult_t end = ncclGroupEnd();
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    cudaDeviceSynchronize();
    ncclCommDestroy(comms[i]);
  }
  check(r, "ncclAllReduce");
  check(end, "ncclGroupEnd");
}

}  // namespace minitensor
