// cuDNN: a convolution forward (NCHW, float) checked against a CPU result.
#include <cudnn.h>
#include <vector>
#include "common.h"
static const char* kTest = "cudnn";

#define CHECK_DNN(call)                                                                          \
  do {                                                                                           \
    cudnnStatus_t s_ = (call);                                                                   \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                            \
      printf("{\"test\": \"%s\", \"ok\": false, \"error\": \"%s: %s\"}\n", kTest, #call,          \
             cudnnGetErrorString(s_));                                                           \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main() {
  const int N = 2, C = 3, H = 16, W = 16, K = 4, R = 3, S = 3, P = H - R + 1, Q = W - S + 1;
  std::vector<float> x(N * C * H * W), w(K * C * R * S), y(N * K * P * Q), ref(N * K * P * Q, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 11) * 0.1f - 0.5f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = (i % 5) * 0.2f - 0.4f;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          float acc = 0;
          for (int c = 0; c < C; ++c)
            for (int r = 0; r < R; ++r)
              for (int s = 0; s < S; ++s)  // cuDNN's CROSS_CORRELATION: no kernel flip
                acc += x[((n * C + c) * H + p + r) * W + q + s] * w[((k * C + c) * R + r) * S + s];
          ref[((n * K + k) * P + p) * Q + q] = acc;
        }
  cudnnHandle_t h;
  CHECK_DNN(cudnnCreate(&h));
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CHECK_DNN(cudnnCreateTensorDescriptor(&xd));
  CHECK_DNN(cudnnCreateTensorDescriptor(&yd));
  CHECK_DNN(cudnnCreateFilterDescriptor(&wd));
  CHECK_DNN(cudnnCreateConvolutionDescriptor(&cd));
  CHECK_DNN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
  CHECK_DNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S));
  CHECK_DNN(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_DNN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, P, Q));
  float *dx, *dw, *dy;
  CHECK_CUDA(cudaMalloc(&dx, x.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dw, w.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dy, y.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dw, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
  const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t ws = 0;
  CHECK_DNN(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &ws));
  void* dws = nullptr;
  if (ws) CHECK_CUDA(cudaMalloc(&dws, ws));
  const float one = 1.0f, zero = 0.0f;
  CHECK_DNN(cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd, algo, dws, ws, &zero, yd, dy));
  CHECK_CUDA(cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) bad += !close_enough(y[i], ref[i], 1e-4f);
  printf("{\"test\": \"%s\", \"ok\": %s, \"version\": %zu, \"mismatches\": %d}\n", kTest, bad ? "false" : "true",
         cudnnGetVersion(), bad);
  cudnnDestroy(h);
  return bad ? 1 : 0;
}
