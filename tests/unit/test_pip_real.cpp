// Resolution over real metadata: the Requires-Dist, Provides-Extra and
// Requires-Python lines below are copied from the wheels on the Python index
// (torch 2.7.0 and what it pins; jax 0.4.35 and 0.6.0 with their CUDA 12
// plugins, which spell their extra `with_cuda` and `with-cuda`), so the
// resolver meets the == pins with platform markers, the extras and the
// self-referencing extras that real projects write. Only `extra == ...` lines
// of projects the tests never ask extras of are cut short (two are kept).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "helpers.hpp"
#include "layer/tar_writer.hpp"
#include "fetch/pip/duplicates.hpp"
#include "fetch/pip/index.hpp"
#include "fetch/pip/resolver.hpp"
#include "pip_fixture.hpp"
#include "util/status.hpp"

using namespace sb;
using namespace sb::pip;

namespace {

struct RealWheel {
  std::string name, version, tags;
  std::vector<std::string> requires_dist, extras;
  std::string requires_python;
};

// clang-format off
const std::vector<RealWheel> kReal = {
    {"torch", "2.7.0", "cp312-cp312-manylinux_2_28_x86_64",
     {"filelock",
      "typing-extensions>=4.10.0",
      "setuptools; python_version >= \"3.12\"",
      "sympy>=1.13.3",
      "networkx",
      "jinja2",
      "fsspec",
      "nvidia-cuda-nvrtc-cu12==12.6.77; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cuda-runtime-cu12==12.6.77; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cuda-cupti-cu12==12.6.80; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cudnn-cu12==9.5.1.17; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cublas-cu12==12.6.4.1; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cufft-cu12==11.3.0.4; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-curand-cu12==10.3.7.77; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cusolver-cu12==11.7.1.2; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cusparse-cu12==12.5.4.2; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cusparselt-cu12==0.6.3; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-nccl-cu12==2.26.2; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-nvtx-cu12==12.6.77; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-nvjitlink-cu12==12.6.85; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "nvidia-cufile-cu12==1.11.1.6; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "triton==3.3.0; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
      "optree>=0.13.0; extra == \"optree\"",
      "opt-einsum>=3.3; extra == \"opt-einsum\""},
     {"optree", "opt-einsum"}, ">=3.9.0"},
    {"triton", "3.3.0", "cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64",
     {"setuptools>=40.8.0", "cmake>=3.20; extra == \"build\"", "lit; extra == \"build\"", "autopep8; extra == \"tests\"", "isort; extra == \"tests\"", "numpy; extra == \"tests\"", "pytest; extra == \"tests\"", "pytest-forked; extra == \"tests\"", "pytest-xdist; extra == \"tests\"", "scipy>=1.7.1; extra == \"tests\"", "llnl-hatchet; extra == \"tests\"", "matplotlib; extra == \"tutorials\"", "pandas; extra == \"tutorials\"", "tabulate; extra == \"tutorials\""},
     {"build", "tests", "tutorials"}, ""},
    {"sympy", "1.14.0", "py3-none-any",
     {"mpmath<1.4,>=1.1.0", "pytest>=7.1.0; extra == \"dev\"", "hypothesis>=6.70.0; extra == \"dev\""},
     {"dev"}, ">=3.9"},
    {"nvidia-cuda-nvrtc-cu12", "12.6.77", "py3-none-manylinux2014_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cuda-runtime-cu12", "12.6.77", "py3-none-manylinux2014_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cuda-cupti-cu12", "12.6.80", "py3-none-manylinux2014_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cudnn-cu12", "9.5.1.17", "py3-none-manylinux_2_28_x86_64",
     {"nvidia-cublas-cu12"},
     {}, ">=3"},
    {"nvidia-cublas-cu12", "12.6.4.1", "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cufft-cu12", "11.3.0.4", "py3-none-manylinux2014_x86_64",
     {"nvidia-nvjitlink-cu12"},
     {}, ">=3"},
    {"nvidia-curand-cu12", "10.3.7.77", "py3-none-manylinux2014_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cusolver-cu12", "11.7.1.2", "py3-none-manylinux2014_x86_64",
     {"nvidia-cublas-cu12", "nvidia-nvjitlink-cu12", "nvidia-cusparse-cu12"},
     {}, ">=3"},
    {"nvidia-cusparse-cu12", "12.5.4.2", "py3-none-manylinux2014_x86_64",
     {"nvidia-nvjitlink-cu12"},
     {}, ">=3"},
    {"nvidia-cusparselt-cu12", "0.6.3", "py3-none-manylinux2014_x86_64",
     {},
     {}, ""},
    {"nvidia-nccl-cu12", "2.26.2", "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-nvtx-cu12", "12.6.77", "py3-none-manylinux2014_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-nvjitlink-cu12", "12.6.85", "py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cufile-cu12", "1.11.1.6", "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64",
     {},
     {}, ">=3"},
    {"mpmath", "1.4.1", "py3-none-any",
     {"pytest>=6; extra == \"tests\"", "numpy; extra == \"tests\""},
     {"tests", "develop", "gmpy2", "gmpy", "gmp", "docs", "ci"}, ">=3.9"},
    {"Jinja2", "3.1.6", "py3-none-any",
     {"MarkupSafe>=2.0", "Babel>=2.7 ; extra == \"i18n\""},
     {"i18n"}, ">=3.7"},
    {"MarkupSafe", "3.0.4", "cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64",
     {},
     {}, ">=3.9"},
    {"filelock", "4.3.1", "py3-none-any",
     {},
     {}, ">=3.11"},
    {"typing_extensions", "4.16.0", "py3-none-any",
     {},
     {}, ">=3.9"},
    {"setuptools", "84.2.1", "py3-none-any",
     {"pytest!=8.1.*,>=6; extra == \"test\"", "virtualenv>=13.0.0; extra == \"test\""},
     {"test", "doc", "ssl", "certs", "core", "check", "cover", "enabler", "type"}, ">=3.10"},
    {"networkx", "3.6.1", "py3-none-any",
     {"asv; extra == \"benchmarking\"", "virtualenv; extra == \"benchmarking\""},
     {"benchmarking", "default", "developer", "doc", "example", "extra", "release", "test", "test-extras"}, "!=3.14.1,>=3.11"},
    {"fsspec", "2026.9.0", "py3-none-any",
     {"adlfs; extra == 'abfs'", "adlfs; extra == 'adl'"},
     {"abfs", "adl", "arrow", "dask", "dev", "doc", "dropbox", "entrypoints", "full", "fuse", "gcs", "git", "github", "gs", "gui", "hdfs", "http", "libarchive", "oci", "s3", "sftp", "smb", "ssh", "test", "test-downstream", "test-full", "tqdm"}, ">=3.10"},
    {"jax", "0.4.35", "py3-none-any",
     {"jaxlib<=0.4.35,>=0.4.34", "ml-dtypes>=0.4.0", "numpy>=1.24", "opt-einsum", "scipy>=1.10", "numpy>=1.26.0; python_version >= \"3.12\"", "scipy>=1.11.1; python_version >= \"3.12\"", "jaxlib==0.4.34; extra == \"ci\"", "jaxlib==0.4.34; extra == \"cuda\"", "jax-cuda12-plugin[with_cuda]<=0.4.35,>=0.4.34; extra == \"cuda\"", "jaxlib==0.4.34; extra == \"cuda12\"", "jax-cuda12-plugin[with_cuda]<=0.4.35,>=0.4.34; extra == \"cuda12\"", "jaxlib==0.4.34; extra == \"cuda12-local\"", "jax-cuda12-plugin==0.4.34; extra == \"cuda12-local\"", "jaxlib==0.4.34; extra == \"cuda12-pip\"", "jax-cuda12-plugin[with_cuda]<=0.4.35,>=0.4.34; extra == \"cuda12-pip\"", "kubernetes; extra == \"k8s\"", "jaxlib==0.4.34; extra == \"minimum-jaxlib\"", "jaxlib<=0.4.35,>=0.4.34; extra == \"tpu\"", "libtpu-nightly==0.1.dev20241010+nightly.cleanup; extra == \"tpu\"", "libtpu==0.0.2; extra == \"tpu\"", "requests; extra == \"tpu\""},
     {"ci", "cpu", "cuda", "cuda12", "cuda12_local", "cuda12_pip", "k8s", "minimum-jaxlib", "tpu"}, ">=3.10"},
    {"jaxlib", "0.4.35", "cp312-cp312-manylinux2014_x86_64",
     {"scipy >=1.10", "numpy >=1.24", "ml-dtypes >=0.2.0", "scipy >=1.11.1 ; python_version >= \"3.12\""},
     {}, ">=3.10"},
    {"jax-cuda12-plugin", "0.4.35", "cp312-cp312-manylinux2014_x86_64",
     {"jax-cuda12-pjrt ==0.4.35", "nvidia-cublas-cu12 >=12.1.3.1 ; extra == 'with_cuda'", "nvidia-cuda-cupti-cu12 >=12.1.105 ; extra == 'with_cuda'", "nvidia-cuda-nvcc-cu12 >=12.1.105 ; extra == 'with_cuda'", "nvidia-cuda-runtime-cu12 >=12.1.105 ; extra == 'with_cuda'", "nvidia-cudnn-cu12 <10.0,>=9.1 ; extra == 'with_cuda'", "nvidia-cufft-cu12 >=11.0.2.54 ; extra == 'with_cuda'", "nvidia-cusolver-cu12 >=11.4.5.107 ; extra == 'with_cuda'", "nvidia-cusparse-cu12 >=12.1.0.106 ; extra == 'with_cuda'", "nvidia-nccl-cu12 >=2.18.1 ; extra == 'with_cuda'", "nvidia-nvjitlink-cu12 >=12.1.105 ; extra == 'with_cuda'"},
     {"with_cuda"}, ">=3.10"},
    {"jax-cuda12-pjrt", "0.4.35", "py3-none-manylinux2014_x86_64",
     {},
     {}, ""},
    {"ml_dtypes", "0.6.0", "cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64",
     {"numpy>=2.0.0", "numpy>=2.1.0; python_version >= \"3.13\"", "numpy>=2.3.0; python_version >= \"3.14\"", "absl-py; extra == \"dev\"", "pytest; extra == \"dev\"", "pytest-xdist; extra == \"dev\"", "pylint>=2.6.0; extra == \"dev\"", "pyink; extra == \"dev\""},
     {"dev"}, ">=3.10"},
    {"numpy", "2.4.6", "cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64",
     {},
     {}, ">=3.11"},
    {"opt_einsum", "3.4.0", "py3-none-any",
     {},
     {}, ">=3.8"},
    {"scipy", "1.17.1", "cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64",
     {"numpy<2.7,>=1.26.4", "pytest>=8.0.0; extra == \"test\"", "pytest-cov; extra == \"test\""},
     {"test", "doc", "dev"}, ">=3.11"},
    {"mpmath", "1.3.0", "py3-none-any",
     {"pytest (>=4.6) ; extra == 'develop'", "pycodestyle ; extra == 'develop'"},
     {"develop", "docs", "gmpy", "tests"}, ""},
    {"nvidia-cublas-cu12", "12.8.4.1", "py3-none-manylinux_2_27_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cudnn-cu12", "9.10.2.21", "py3-none-manylinux_2_27_x86_64",
     {"nvidia-cublas-cu12"},
     {}, ">=3"},
    {"nvidia-nvjitlink-cu12", "12.8.93", "py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64",
     {},
     {}, ">=3"},
    {"nvidia-cuda-nvcc-cu12", "12.8.93", "py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64",
     {},
     {}, ">=3"},
    {"jaxlib", "0.4.34", "cp312-cp312-manylinux2014_x86_64",
     {"scipy >=1.10", "numpy >=1.24", "ml-dtypes >=0.2.0", "scipy >=1.11.1 ; python_version >= \"3.12\""},
     {}, ">=3.10"},
    {"jax-cuda12-plugin", "0.4.34", "cp312-cp312-manylinux2014_x86_64",
     {"jax-cuda12-pjrt ==0.4.34", "nvidia-cublas-cu12 >=12.1.3.1 ; extra == 'with_cuda'", "nvidia-cuda-cupti-cu12 >=12.1.105 ; extra == 'with_cuda'", "nvidia-cuda-nvcc-cu12 >=12.1.105 ; extra == 'with_cuda'", "nvidia-cuda-runtime-cu12 >=12.1.105 ; extra == 'with_cuda'", "nvidia-cudnn-cu12 <10.0,>=9.1 ; extra == 'with_cuda'", "nvidia-cufft-cu12 >=11.0.2.54 ; extra == 'with_cuda'", "nvidia-cusolver-cu12 >=11.4.5.107 ; extra == 'with_cuda'", "nvidia-cusparse-cu12 >=12.1.0.106 ; extra == 'with_cuda'", "nvidia-nccl-cu12 >=2.18.1 ; extra == 'with_cuda'", "nvidia-nvjitlink-cu12 >=12.1.105 ; extra == 'with_cuda'"},
     {"with_cuda"}, ">=3.10"},
    {"jax-cuda12-pjrt", "0.4.34", "py3-none-manylinux2014_x86_64",
     {},
     {}, ""},
    {"ml_dtypes", "0.5.1", "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64",
     {"numpy>=1.21", "numpy>=1.21.2; python_version >= \"3.10\"", "numpy>=1.23.3; python_version >= \"3.11\"", "numpy>=1.26.0; python_version >= \"3.12\"", "numpy>=2.1.0; python_version >= \"3.13\"", "absl-py; extra == \"dev\"", "pytest; extra == \"dev\"", "pytest-xdist; extra == \"dev\"", "pylint>=2.6.0; extra == \"dev\"", "pyink; extra == \"dev\""},
     {"dev"}, ">=3.9"},
    {"numpy", "2.2.6", "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64",
     {},
     {}, ">=3.10"},
    {"scipy", "1.15.3", "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64",
     {"numpy<2.5,>=1.23.5", "pytest; extra == \"test\"", "pytest-cov; extra == \"test\""},
     {"test", "doc", "dev"}, ">=3.10"},
    {"jax", "0.6.0", "py3-none-any",
     {"jaxlib<=0.6.0,>=0.6.0", "ml_dtypes>=0.5.0", "numpy>=1.25", "numpy>=1.26.0; python_version >= \"3.12\"", "opt_einsum", "scipy>=1.11.1", "jaxlib<=0.6.0,>=0.6.0; extra == \"cuda\"", "jax-cuda12-plugin[with-cuda]<=0.6.0,>=0.6.0; extra == \"cuda\"", "jaxlib<=0.6.0,>=0.6.0; extra == \"cuda12\"", "jax-cuda12-plugin[with-cuda]<=0.6.0,>=0.6.0; extra == \"cuda12\""},
     {"minimum-jaxlib", "cpu", "ci", "tpu", "cuda", "cuda12", "cuda12-local", "rocm", "k8s"}, ">=3.10"},
    {"jax-cuda12-plugin", "0.6.0", "cp312-cp312-manylinux2014_x86_64",
     {"jax-cuda12-pjrt==0.6.0", "nvidia-cublas-cu12>=12.1.3.1; extra == \"with-cuda\"", "nvidia-cuda-cupti-cu12>=12.1.105; extra == \"with-cuda\"", "nvidia-cuda-nvcc-cu12>=12.6.85; extra == \"with-cuda\"", "nvidia-cuda-runtime-cu12>=12.1.105; extra == \"with-cuda\"", "nvidia-cudnn-cu12<10.0,>=9.8; extra == \"with-cuda\"", "nvidia-cufft-cu12>=11.0.2.54; extra == \"with-cuda\"", "nvidia-cusolver-cu12>=11.4.5.107; extra == \"with-cuda\"", "nvidia-cusparse-cu12>=12.1.0.106; extra == \"with-cuda\"", "nvidia-nccl-cu12>=2.18.1; extra == \"with-cuda\"", "nvidia-nvjitlink-cu12>=12.1.105; extra == \"with-cuda\""},
     {"with-cuda"}, ">=3.10"},
    {"jax-cuda12-pjrt", "0.6.0", "py3-none-manylinux2014_x86_64",
     {},
     {}, ""},
    {"jaxlib", "0.6.0", "cp312-cp312-manylinux2014_x86_64",
     {"scipy>=1.11.1", "numpy>=1.25", "ml_dtypes>=0.2.0"},
     {}, ">=3.10"},
};
// clang-format on

struct RealIndex : test::IndexBed {
  Target target;

  explicit RealIndex(const std::vector<RealWheel>& wheels) {
    target.python = "3.12";
    target.libc_version = "2.36";
    for (const auto& w : wheels) {
      test::FixtureWheel f{w.name, w.version, w.tags, w.requires_dist, w.extras, {}};
      f.requires_python = w.requires_python;
      index.add(f);
    }
  }

  // "key==version[extras]" for each wheel, sorted by key.
  std::string resolve_(const std::vector<std::string>& reqs, int max_rounds = 20000) {
    auto idx = make_http_index(config(), store, *fetcher);
    std::vector<Requirement> rs;
    for (const auto& r : reqs) rs.push_back(Requirement::parse(r));
    ResolveOptions o;
    o.max_rounds = max_rounds;
    std::string s;
    for (const auto& w : resolve(rs, target, *idx, o)) {
      s += (s.empty() ? "" : " ") + w.key + "==" + w.version;
      if (!w.extras.empty()) {
        std::string e;
        for (const auto& x : w.extras) e += (e.empty() ? "" : ",") + x;
        s += "[" + e + "]";
      }
    }
    return s;
  }
};

const std::string kTorchSet =
    "filelock==4.3.1 fsspec==2026.9.0 jinja2==3.1.6 markupsafe==3.0.4 mpmath==1.3.0 networkx==3.6.1 "
    "nvidia-cublas-cu12==12.6.4.1 nvidia-cuda-cupti-cu12==12.6.80 nvidia-cuda-nvrtc-cu12==12.6.77 "
    "nvidia-cuda-runtime-cu12==12.6.77 nvidia-cudnn-cu12==9.5.1.17 nvidia-cufft-cu12==11.3.0.4 "
    "nvidia-cufile-cu12==1.11.1.6 nvidia-curand-cu12==10.3.7.77 nvidia-cusolver-cu12==11.7.1.2 "
    "nvidia-cusparse-cu12==12.5.4.2 nvidia-cusparselt-cu12==0.6.3 nvidia-nccl-cu12==2.26.2 "
    "nvidia-nvjitlink-cu12==12.6.85 nvidia-nvtx-cu12==12.6.77 setuptools==84.2.1 sympy==1.14.0 "
    "torch==2.7.0 triton==3.3.0 typing-extensions==4.16.0";

}  // namespace

TEST_CASE("pip real metadata: torch 2.7.0 resolves to its pinned nvidia wheels and triton", "[pip]") {
  RealIndex f(kReal);
  // The index also has newer cuBLAS, cuDNN and nvJitLink wheels and mpmath 1.4.1:
  // torch's == pins and sympy's mpmath<1.4 keep them out.
  CHECK(f.resolve_({"torch==2.7.0"}) == kTorchSet);
  // The same wheels for aarch64 have no file here: the markers are for x86_64
  // only, and on aarch64 no wheel of torch fits.
  f.target.machine = "aarch64";
  CHECK_THROWS_WITH(f.resolve_({"torch==2.7.0"}), Catch::Contains("no wheel of torch for CPython 3.12"));
}

TEST_CASE("pip real metadata: jax[cuda12] pulls the CUDA 12 plugin with its with_cuda and with-cuda extra", "[pip]") {
  RealIndex f(kReal);
  // jax 0.4.35 asks `jax-cuda12-plugin[with_cuda]` of a plugin whose markers say
  // `extra == 'with_cuda'`, and pins jaxlib==0.4.34 for the extra.
  CHECK(f.resolve_({"jax[cuda12]==0.4.35"}) ==
        "jax==0.4.35[cuda12] jax-cuda12-pjrt==0.4.35 jax-cuda12-plugin==0.4.35[with-cuda] jaxlib==0.4.34 "
        "ml-dtypes==0.6.0 numpy==2.4.6 nvidia-cublas-cu12==12.8.4.1 nvidia-cuda-cupti-cu12==12.6.80 "
        "nvidia-cuda-nvcc-cu12==12.8.93 nvidia-cuda-runtime-cu12==12.6.77 nvidia-cudnn-cu12==9.10.2.21 "
        "nvidia-cufft-cu12==11.3.0.4 nvidia-cusolver-cu12==11.7.1.2 nvidia-cusparse-cu12==12.5.4.2 "
        "nvidia-nccl-cu12==2.26.2 nvidia-nvjitlink-cu12==12.8.93 opt-einsum==3.4.0 scipy==1.17.1");
  // jax 0.6.0 spells it `with-cuda` on both sides; cuDNN>=9.8 and nvcc>=12.6.85.
  CHECK(f.resolve_({"jax[cuda]==0.6.0"}) ==
        "jax==0.6.0[cuda] jax-cuda12-pjrt==0.6.0 jax-cuda12-plugin==0.6.0[with-cuda] jaxlib==0.6.0 "
        "ml-dtypes==0.6.0 numpy==2.4.6 nvidia-cublas-cu12==12.8.4.1 nvidia-cuda-cupti-cu12==12.6.80 "
        "nvidia-cuda-nvcc-cu12==12.8.93 nvidia-cuda-runtime-cu12==12.6.77 nvidia-cudnn-cu12==9.10.2.21 "
        "nvidia-cufft-cu12==11.3.0.4 nvidia-cusolver-cu12==11.7.1.2 nvidia-cusparse-cu12==12.5.4.2 "
        "nvidia-nccl-cu12==2.26.2 nvidia-nvjitlink-cu12==12.8.93 opt-einsum==3.4.0 scipy==1.17.1");
  // Without the extra: no plugin, no nvidia wheel.
  CHECK(f.resolve_({"jax==0.4.35"}) ==
        "jax==0.4.35 jaxlib==0.4.35 ml-dtypes==0.6.0 numpy==2.4.6 opt-einsum==3.4.0 scipy==1.17.1");
}

TEST_CASE("pip real metadata: torch and jax[cuda12] together share torch's pinned nvidia wheels", "[pip]") {
  RealIndex f(kReal);
  for (const auto& order : {std::vector<std::string>{"torch==2.7.0", "jax[cuda12]==0.4.35"},
                            std::vector<std::string>{"jax[cuda12]==0.4.35", "torch==2.7.0"}}) {
    INFO(order[0]);
    CHECK(f.resolve_(order) ==
          "filelock==4.3.1 fsspec==2026.9.0 jax==0.4.35[cuda12] jax-cuda12-pjrt==0.4.35 "
          "jax-cuda12-plugin==0.4.35[with-cuda] jaxlib==0.4.34 jinja2==3.1.6 markupsafe==3.0.4 ml-dtypes==0.6.0 "
          "mpmath==1.3.0 networkx==3.6.1 numpy==2.4.6 "
          "nvidia-cublas-cu12==12.6.4.1 nvidia-cuda-cupti-cu12==12.6.80 nvidia-cuda-nvcc-cu12==12.8.93 "
          "nvidia-cuda-nvrtc-cu12==12.6.77 nvidia-cuda-runtime-cu12==12.6.77 nvidia-cudnn-cu12==9.5.1.17 "
          "nvidia-cufft-cu12==11.3.0.4 nvidia-cufile-cu12==1.11.1.6 nvidia-curand-cu12==10.3.7.77 "
          "nvidia-cusolver-cu12==11.7.1.2 nvidia-cusparse-cu12==12.5.4.2 nvidia-cusparselt-cu12==0.6.3 "
          "nvidia-nccl-cu12==2.26.2 nvidia-nvjitlink-cu12==12.6.85 nvidia-nvtx-cu12==12.6.77 opt-einsum==3.4.0 "
          "scipy==1.17.1 setuptools==84.2.1 sympy==1.14.0 torch==2.7.0 triton==3.3.0 typing-extensions==4.16.0");
  }
}

TEST_CASE("pip resolver: an extra that asks the same project with another extra settles", "[pip]") {
  // As `jax[cuda]` asking `jax[cuda12]`: the self-requirement must add its
  // extras once and stay, not flip them back and forth until the step limit.
  RealIndex f({{"selfy", "1.0", "py3-none-any",
                {"base", "selfy[cuda12]; extra == \"cuda\"", "selfy[tools]; extra == \"cuda12\"",
                 "plug[with_cuda]>=1; extra == \"cuda12\"", "tool; extra == \"tools\""},
                {"cuda", "cuda12", "tools"}, ""},
               {"selfy", "2.0", "py3-none-any", {"selfy[cuda12]==2.0; extra == \"cuda\""}, {"cuda", "cuda12"}, ""},
               {"plug", "1.0", "py3-none-any", {"libx; extra == \"with-cuda\""}, {"with-cuda"}, ""},
               {"base", "1.0", "py3-none-any", {}, {}, ""},
               {"tool", "1.0", "py3-none-any", {}, {}, ""},
               {"libx", "1.0", "py3-none-any", {}, {}, ""}});
  CHECK(f.resolve_({"selfy[cuda]<2"}, 200) ==
        "base==1.0 libx==1.0 plug==1.0[with-cuda] selfy==1.0[cuda,cuda12,tools] tool==1.0");
  CHECK(f.resolve_({"selfy[cuda12]<2"}, 200) ==
        "base==1.0 libx==1.0 plug==1.0[with-cuda] selfy==1.0[cuda12,tools] tool==1.0");
  CHECK(f.resolve_({"selfy[cuda]"}, 200) == "selfy==2.0[cuda,cuda12]");
  // A version change drops what the old version's extras asked.
  CHECK(f.resolve_({"selfy[cuda]", "selfy<2"}, 200) ==
        "base==1.0 libx==1.0 plug==1.0[with-cuda] selfy==1.0[cuda,cuda12,tools] tool==1.0");
}

TEST_CASE("pip resolver: a musl loader in the layers below chooses musllinux wheels", "[pip]") {
  CHECK(musl_version_from_apk("C:Q1x\nP:busybox\nV:1.36.1-r29\n\nC:Q1y\nP:musl\nV:1.2.5-r0\nA:x86_64\n\n") == "1.2");
  CHECK(musl_version_from_apk("P:musl-utils\nV:1.2.5-r0\n") == "");
  CHECK(musl_version_from_apk("P:musl\nV:garbage\n") == "");

  // A layer blob as Alpine's: the loader and apk's database.
  TempDir d{fs::temp_directory_path()};
  fs::path blob = d.path() / "alpine.tar";
  EntryMap entries;
  TarEntry loader;
  loader.type = TarEntry::Type::File;
  loader.mode = 0755;
  loader.source = (d.path() / "ld").string();
  write_file_atomic(d.path() / "ld", "ELF");
  loader.size = 3;
  entries["lib/ld-musl-x86_64.so.1"] = loader;
  TarEntry db = loader;
  db.mode = 0644;
  std::string text = "P:alpine-baselayout\nV:3.6.5-r0\n\nP:musl\nV:1.2.5-r0\n\n";
  write_file_atomic(d.path() / "db", text);
  db.source = (d.path() / "db").string();
  db.size = text.size();
  entries["lib/apk/db/installed"] = db;
  test::write_tar_file(entries, blob);
  LayerListing alpine = list_layer("alpine", blob);
  CHECK(alpine.musl_version == "1.2");

  RealIndex f({{"fastlib", "1.0", "cp312-cp312-manylinux_2_17_x86_64", {}, {}, ""},
               {"fastlib", "1.0", "cp312-cp312-musllinux_1_1_x86_64", {}, {}, ""},
               {"fastlib", "1.0", "cp312-cp312-musllinux_1_2_x86_64", {}, {}, ""},
               {"oldmusl", "1.0", "cp312-cp312-musllinux_1_1_x86_64", {}, {}, ""},
               {"newmusl", "1.0", "cp312-cp312-musllinux_1_3_x86_64", {}, {}, ""}});
  auto file_of = [&](const std::string& req) {
    auto idx = make_http_index(f.config(), f.store, *f.fetcher);
    return resolve({Requirement::parse(req)}, f.target, *idx).at(0).filename;
  };
  // A glibc base: the manylinux wheel; no musllinux wheel fits.
  CHECK_FALSE(detect_musl({{"debian", {"lib/x86_64-linux-gnu/libc.so.6", "lib64/ld-linux-x86-64.so.2"}, ""}}, f.target));
  CHECK(file_of("fastlib") == "fastlib-1.0-cp312-cp312-manylinux_2_17_x86_64.whl");
  CHECK_THROWS_WITH(file_of("oldmusl"), Catch::Contains("no wheel of oldmusl for CPython 3.12, manylinux glibc 2.36"));
  // Alpine below (and a layer above it without the loader): musl 1.2.
  REQUIRE(detect_musl({alpine, {"app", {"usr/bin/app"}, ""}}, f.target));
  CHECK(f.target.describe() == "CPython 3.12, musllinux musl 1.2, x86_64");
  CHECK(file_of("fastlib") == "fastlib-1.0-cp312-cp312-musllinux_1_2_x86_64.whl");
  CHECK(file_of("oldmusl") == "oldmusl-1.0-cp312-cp312-musllinux_1_1_x86_64.whl");
  CHECK_THROWS_WITH(file_of("newmusl"), Catch::Contains("musllinux musl 1.2"));
  // The loader without apk's database: the oldest tag, musl 1.1.
  Target t2;
  REQUIRE(detect_musl({{"musl", {"lib/ld-musl-x86_64.so.1"}, ""}}, t2));
  CHECK(t2.libc_version == "1.1");
  // Another architecture's loader does not count.
  Target t3;
  t3.machine = "aarch64";
  CHECK_FALSE(detect_musl({{"musl", {"lib/ld-musl-x86_64.so.1"}, ""}}, t3));
}
