// conv2d through cuDNN: NCHW float tensors, implicit-GEMM forward algorithm
// (needs no workspace).
#include <cudnn.h>

#include "check.hpp"

namespace minitensor {

namespace {

void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw Error(std::string(what) + ": " + cudnnGetErrorString(s));
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, int pad) {
  const auto& xs = x.shape();
  const auto& ws = w.shape();
  if (xs.size() != 4 || ws.size() != 4 || xs[1] != ws[1]) throw Error("conv2d: want x [n, c, h, w], w [k, c, r, s]");
  if (x.device() != w.device()) throw Error("conv2d: x and w are on different devices");
  detail::DeviceGuard g(x.device());
  cudnnHandle_t h;
  check(cudnnCreate(&h), "cudnnCreate");
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnCreateFilterDescriptor(&wd);
  cudnnCreateConvolutionDescriptor(&cd);
  Tensor y;
  try {
    check(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, xs[0], xs[1], xs[2], xs[3]), "x");
    check(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, ws[0], ws[1], ws[2], ws[3]), "w");
    check(cudnnSetConvolution2dDescriptor(cd, pad, pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "convolution");
    int n, c, oh, ow;
    check(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &oh, &ow), "output size");
    y = Tensor({n, c, oh, ow}, x.device());
    check(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, oh, ow), "y");
    const float one = 1.0f, zero = 0.0f;
    check(cudnnConvolutionForward(h, &one, xd, x.data(), wd, w.data(), cd,
                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero, yd, y.data()),
          "cudnnConvolutionForward");
  } catch (...) {
    cudnnDestroyConvolutionDescriptor(cd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroy(h);
    throw;
  }
  cudnnDestroyConvolutionDescriptor(cd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroy(h);
  return y;
}

}  // namespace minitensor
