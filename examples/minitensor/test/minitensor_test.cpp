// Checks minitensor on the GPUs it finds against plain CPU arithmetic:
// fill/add (our kernels), matmul (cuBLAS), conv2d (cuDNN), all-reduce over
// every GPU (NCCL). `minitensor_test --archs` prints the compiled archs.
// Exit status: 0 all good, 1 a wrong result or a failed call, 2 no GPU.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "minitensor/minitensor.hpp"

using namespace minitensor;

namespace {

int failures = 0;

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i)
    if (i >= got.size() || std::fabs(got[i] - want[i]) > 1e-3f * (1 + std::fabs(want[i]))) {
      std::printf("FAIL %s: element %zu is %g, expected %g\n", what, i, i < got.size() ? got[i] : NAN, want[i]);
      ++failures;
      return;
    }
  std::printf("ok   %s\n", what);
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7) % 11) - 3.0f;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--archs") == 0) {
    std::printf("%s\n", compiled_archs().c_str());
    return 0;
  }
  const int gpus = device_count();
  if (gpus == 0) {
    std::printf("no CUDA device; compiled for %s\n", compiled_archs().c_str());
    return 2;
  }
  try {
    Tensor t({4, 8});
    t.fill(1.5f);
    Tensor u = Tensor::from_host(ramp(32, 1), {4, 8});
    t.add_(u);
    std::vector<float> want = ramp(32, 1);
    for (auto& x : want) x += 1.5f;
    expect_near(t.to_host(), want, "fill + add_ (kernels)");

    const int m = 5, k = 7, n = 3;
    auto a = ramp(m * k, 0.5f), b = ramp(k * n, 0.25f);
    std::vector<float> c(m * n, 0);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        for (int p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
    expect_near(matmul(Tensor::from_host(a, {m, k}), Tensor::from_host(b, {k, n})).to_host(), c, "matmul (cuBLAS)");

    const int N = 1, C = 2, H = 5, W = 5, K = 3, R = 3, S = 3, pad = 1;
    auto x = ramp(N * C * H * W, 0.3f), w = ramp(K * C * R * S, 0.2f);
    std::vector<float> y(N * K * H * W, 0);
    for (int kk = 0; kk < K; ++kk)
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < W; ++j)
          for (int cc = 0; cc < C; ++cc)
            for (int r = 0; r < R; ++r)
              for (int s = 0; s < S; ++s) {
                int yi = i + r - pad, xj = j + s - pad;
                if (yi < 0 || yi >= H || xj < 0 || xj >= W) continue;
                y[(kk * H + i) * W + j] += x[(cc * H + yi) * W + xj] * w[((kk * C + cc) * R + r) * S + s];
              }
    expect_near(conv2d(Tensor::from_host(x, {N, C, H, W}), Tensor::from_host(w, {K, C, R, S}), pad).to_host(), y,
                "conv2d (cuDNN)");

    std::vector<Tensor> parts;
    for (int g = 0; g < gpus; ++g) {
      parts.emplace_back(std::vector<int>{16}, g);
      parts.back().fill(static_cast<float>(g + 1));
    }
    all_reduce_sum(parts);
    std::vector<float> sum(16, static_cast<float>(gpus * (gpus + 1) / 2));
    for (int g = 0; g < gpus; ++g) expect_near(parts[g].to_host(), sum, "all-reduce (NCCL)");
  } catch (const Error& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  std::printf("%s on %d GPU(s), compiled for %s\n", failures ? "FAILED" : "passed", gpus, compiled_archs().c_str());
  return failures ? 1 : 0;
}
