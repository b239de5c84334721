#include "verify/builtin_tests.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "util/digest.hpp"
#include "util/error.hpp"
#include "util/file.hpp"
#include "util/process.hpp"
#include "verify/elf.hpp"
#include "verify/run_in_image.hpp"

namespace sb::verify {

namespace {

struct Program {
  const char* component;
  const char* file;                  // in builtin_program_sources()
  std::vector<std::string> libs;     // linked besides cudart
  std::vector<std::string> headers;  // the image must have these
};

const std::vector<Program>& programs() {
  static const std::vector<Program> p{
      {"cuda", "device_query.cu", {}, {"cuda_runtime.h"}},
      {"cublas", "gemm.cu", {"cublas"}, {"cuda_runtime.h", "cublas_v2.h"}},
      {"cudnn", "conv.cu", {"cudnn"}, {"cuda_runtime.h", "cudnn.h"}},
      {"nccl", "allreduce.cu", {"nccl"}, {"cuda_runtime.h", "nccl.h"}},
  };
  return p;
}

const Program* program_of(const std::string& component) {
  for (const auto& p : programs())
    if (component == p.component) return &p;
  return nullptr;
}

// Import, a matmul on the GPU checked against the CPU, and the CUDA and cuDNN
// versions the framework reports against SB_EXPECT_CUDA / SB_EXPECT_CUDNN.
// Prints one JSON line; exits 0 only when everything held.
const char* const kPythonCommon = R"PY(
import json, os, sys
out = {"test": NAME}
def same(got, want):
    if not want or got is None:
        return True
    # A catalog version may carry a packaging revision or build: NVIDIA's apt
    # NCCL "2.21.5-1" (+cuda12.4) is the library's 2.21.5.
    want = str(want).split("-")[0].split("+")[0]
    a, b = str(got).split("."), want.split(".")
    n = min(len(a), len(b))
    return a[:n] == b[:n]
def cudnn_dotted(v):
    if v is None: return None
    v = int(v)
    return "%d.%d.%d" % ((v // 10000, v % 10000 // 100, v % 100) if v >= 9000 else (v // 1000, v % 1000 // 100, v % 100))
def finish(ok, **kw):
    out.update(kw)
    for key in ("cuda", "cudnn", "nccl"):
        want = os.environ.get("SB_EXPECT_" + key.upper(), "")
        if want and out.get(key) is not None and not same(out[key], want):
            ok = False
            out.setdefault("errors", []).append("%s %s, the image was resolved with %s" % (key, out[key], want))
    out["ok"] = bool(ok)
    print(json.dumps(out))
    sys.exit(0 if ok else 1)
# SB_PART=import: the part that needs no GPU (the framework imports with the
# image's libraries, and reports the CUDA and cuDNN it was built with and loads).
IMPORT_ONLY = os.environ.get("SB_PART") == "import"
)PY";

const std::map<std::string, std::string>& python_tests() {
  static const std::map<std::string, std::string> t{
      {"pytorch", R"PY(
import torch
torch.backends.cuda.matmul.allow_tf32 = False
if IMPORT_ONLY:
    finish(True, version=torch.__version__, cuda=torch.version.cuda, cudnn=cudnn_dotted(torch.backends.cudnn.version()),
           nccl=".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None)
ok = torch.cuda.is_available() and torch.cuda.device_count() > 0
err = None
if ok:
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    err = float(((a.cuda() @ b.cuda()).cpu() - a @ b).abs().max())
    ok = err < 1e-2
finish(ok, version=torch.__version__, cuda=torch.version.cuda, cudnn=cudnn_dotted(torch.backends.cudnn.version()),
       gpus=torch.cuda.device_count(), max_error=err)
)PY"},
      {"jax", R"PY(
import jax, jax.numpy as jnp, numpy as np
if IMPORT_ONLY:
    import jaxlib
    finish(True, version=jax.__version__, jaxlib=getattr(jaxlib, "__version__", None))
gpus = [d for d in jax.devices() if d.platform == "gpu"]
ok, err = bool(gpus), None
if ok:
    a, b = np.random.rand(256, 256).astype(np.float32), np.random.rand(256, 256).astype(np.float32)
    g = np.asarray(jnp.matmul(jax.device_put(a, gpus[0]), jax.device_put(b, gpus[0]), precision="highest"))
    err = float(np.abs(g - a @ b).max())
    ok = err < 1e-2
finish(ok, version=jax.__version__, gpus=len(gpus), max_error=err)
)PY"},
      {"tensorflow", R"PY(
import tensorflow as tf
tf.config.experimental.enable_tensor_float_32_execution(False)
info = tf.sysconfig.get_build_info()
if IMPORT_ONLY:
    finish(True, version=tf.__version__, cuda=info.get("cuda_version"), cudnn=info.get("cudnn_version"))
gpus = tf.config.list_physical_devices("GPU")
ok, err = bool(gpus), None
if ok:
    a, b = tf.random.normal([256, 256]), tf.random.normal([256, 256])
    with tf.device("/GPU:0"):
        g = tf.matmul(a, b)
    with tf.device("/CPU:0"):
        c = tf.matmul(a, b)
    err = float(tf.reduce_max(tf.abs(g - c)))
    ok = err < 1e-2
finish(ok, version=tf.__version__, cuda=info.get("cuda_version"), cudnn=info.get("cudnn_version"), gpus=len(gpus),
       max_error=err)
)PY"},
  };
  return t;
}

// Image directories, in the order they are tried: the CUDA toolkit's, the
// system's, LD_LIBRARY_PATH's, then NVIDIA's pip wheels (site-packages/nvidia/*).
std::vector<std::string> wheel_dirs(const ImageRoot& root, const std::string& sub) {
  std::vector<std::string> out;
  for (const char* base : {"/usr/lib", "/usr/local/lib", "/opt/conda/lib"}) {
    auto host = root.resolve(base);
    if (!host) continue;
    std::error_code ec;
    for (const auto& py : fs::directory_iterator(*host, ec)) {
      if (py.path().filename().string().rfind("python3", 0) != 0) continue;
      for (const char* pkgs : {"site-packages", "dist-packages"}) {
        fs::path nv = py.path() / pkgs / "nvidia";
        std::error_code ec2;
        for (const auto& comp : fs::directory_iterator(nv, ec2)) {
          std::string p = root.image_path(comp.path() / sub);
          if (fs::is_directory(comp.path() / sub)) out.push_back(p);
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> include_dirs(const ImageRoot& root) {
  std::vector<std::string> dirs{"/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include",
                                "/usr/local/cuda/targets/sbsa-linux/include", "/usr/include",
                                "/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu"};
  for (const auto& d : wheel_dirs(root, "include")) dirs.push_back(d);
  return dirs;
}

std::vector<std::string> lib_dirs(const ImageRoot& root, const std::vector<std::string>& ld_library_path) {
  std::vector<std::string> dirs{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                                "/usr/local/cuda/targets/sbsa-linux/lib"};
  for (const auto& d : ld_library_path) dirs.push_back(d);
  for (const auto& d : root.linker_dirs()) dirs.push_back(d);
  for (const auto& d : wheel_dirs(root, "lib")) dirs.push_back(d);
  return dirs;
}

// The image path of the first dir holding `name` (a header).
std::optional<std::string> find_in(const ImageRoot& root, const std::vector<std::string>& dirs, const std::string& name) {
  for (const auto& d : dirs)
    if (root.resolve(d + "/" + name)) return d;
  return std::nullopt;
}

// A library `lib<name>.so` or `lib<name>.so.N...` in the image: its image path.
std::optional<std::string> find_library(const ImageRoot& root, const std::vector<std::string>& dirs,
                                        const std::string& name) {
  const std::string prefix = "lib" + name + ".so";
  for (const auto& d : dirs) {
    auto host = root.resolve(d);
    if (!host || !fs::is_directory(*host)) continue;
    if (root.resolve(d + "/" + prefix)) return d + "/" + prefix;
    std::vector<std::string> versioned;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(*host, ec)) {
      std::string f = e.path().filename().string();
      if (f.rfind(prefix + ".", 0) == 0) versioned.push_back(f);
    }
    std::sort(versioned.begin(), versioned.end());
    if (!versioned.empty()) return d + "/" + versioned.front();
  }
  return std::nullopt;
}

std::string gencode_flags(const std::vector<std::string>& arch, std::vector<std::string>& argv) {
  std::vector<std::string> a = arch.empty() ? std::vector<std::string>{"8.0"} : arch;
  std::string key;
  for (auto cc : a) {
    if (cc.ends_with("+PTX")) cc.resize(cc.size() - 4);
    std::string n;
    for (char c : cc)
      if (c != '.') n += c;
    argv.push_back("-gencode");
    argv.push_back("arch=compute_" + n + ",code=[sm_" + n + ",compute_" + n + "]");
    key += n + ",";
  }
  return key;
}

}  // namespace

fs::path find_host_nvcc(const fs::path& given) {
  if (!given.empty()) return given;
  if (const char* e = getenv("STACKBUILD_NVCC"); e && *e) return e;
  if (fs::path on_path = find_on_path("nvcc"); !on_path.empty()) return on_path;
  if (access("/usr/local/cuda/bin/nvcc", X_OK) == 0) return "/usr/local/cuda/bin/nvcc";
  return {};
}

CompiledProgram compile_builtin(const ImageRoot& root, const std::string& component, const BuiltinOptions& o) {
  CompiledProgram c;
  c.component = component;
  const Program* prog = program_of(component);
  if (!prog) throw Error("internal: no built-in program for '" + component + "'");
  const auto& sources = builtin_program_sources();

  // What the image offers: headers and libraries.
  std::vector<std::string> incs = include_dirs(root), libs = lib_dirs(root, o.ld_library_path);
  std::vector<std::string> use_incs;
  for (const auto& h : prog->headers) {
    auto d = find_in(root, incs, h);
    if (!d) {
      c.error = "the image has no " + h + " (looked in " + std::to_string(incs.size()) +
                " include directories, e.g. /usr/local/cuda/include); add the component's headers to the image";
      return c;
    }
    if (std::find(use_incs.begin(), use_incs.end(), *d) == use_incs.end()) use_incs.push_back(*d);
  }
  std::vector<std::string> need{"cudart"};
  for (const auto& l : prog->libs) need.push_back(l);
  std::map<std::string, std::string> lib_path;  // name -> image path
  for (const auto& n : need) {
    auto p = find_library(root, libs, n);
    if (!p) {
      c.error = "the image has no lib" + n + ".so* in its library directories";
      return c;
    }
    lib_path[n] = *p;
    std::string dir = fs::path(*p).parent_path().string();
    if (std::find(c.lib_dirs.begin(), c.lib_dirs.end(), dir) == c.lib_dirs.end()) c.lib_dirs.push_back(dir);
  }

  // The cache key: the program, the image's headers and libraries as found, the archs.
  std::vector<std::string> gencode;
  std::string arch_key = gencode_flags(o.arch, gencode);
  auto image_nvcc = root.resolve("/usr/local/cuda/bin/nvcc");
  bool in_image = image_nvcc && (root.resolve("/usr/bin/g++") || root.resolve("/usr/bin/c++")) && o.sandbox;
  if (!in_image && !o.architecture.empty()) {
    c.error = "no nvcc in the linux/" + o.architecture + " image (with a C++ compiler) to build the program for it: "
              "this machine's nvcc builds for this machine";
    return c;
  }
  fs::path host_nvcc = in_image ? fs::path() : find_host_nvcc(o.host_nvcc);
  if (!in_image && host_nvcc.empty()) {
    c.error = "no nvcc: the image has none (with a C++ compiler) and neither has this host (give --nvcc)";
    return c;
  }
  c.compiler = in_image ? "image nvcc /usr/local/cuda/bin/nvcc" : "host nvcc " + host_nvcc.string();
  KeyHasher key;
  key.field("stackbuild-builtin", "1").field("program", sources.at(prog->file)).field("common", sources.at("common.h"));
  key.field("arch", arch_key).field("compiler", c.compiler).field("root", root.root().string());
  for (const auto& [n, p] : lib_path) key.field(n, p);
  fs::path dir = o.cache_dir / key.finish().hex();
  fs::path bin = dir / component;

  if (fs::exists(bin)) ::utimensat(AT_FDCWD, dir.c_str(), nullptr, 0);  // used now: `stackbuild gc` evicts the least recent
  if (!fs::exists(bin)) {
    fs::create_directories(o.cache_dir);
    TempDir tmp(o.cache_dir, ".compile-");
    fs::path src = tmp.path() / "src", out = tmp.path() / "out";
    fs::create_directories(src);
    fs::create_directories(out);
    for (const auto& [name, text] : sources) write_file_atomic(src / name, text);
    // Links named lib<name>.so to what the image has (a wheel ships only
    // lib<name>.so.N): to image paths for the image's nvcc, which sees them at
    // /.stackbuild-build/lib, to host paths for the host's.
    fs::path links = tmp.path() / "lib";
    fs::create_directories(links);
    for (const auto& [n, img] : lib_path)
      fs::create_symlink(in_image ? fs::path(img) : *root.resolve(img), links / ("lib" + n + ".so"));
    std::string log;
    int status = 0;
    if (in_image) {
      RunOptions run;
      run.architecture = o.architecture;
      run.mounts = {{src, "/.stackbuild-build/src", true},
                    {out, "/.stackbuild-build/out", false},
                    {links, "/.stackbuild-build/lib", true}};
      run.env = {{"PATH", "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}};
      run.argv = {"/usr/local/cuda/bin/nvcc", "-O2", "-cudart", "shared", "-o", "/.stackbuild-build/out/" + component};
      for (const auto& g : gencode) run.argv.push_back(g);
      for (const auto& i : use_incs) run.argv.push_back("-I" + i);
      run.argv.push_back("-L/.stackbuild-build/lib");
      for (const auto& d : c.lib_dirs) run.argv.push_back("-L" + d);
      run.argv.push_back(std::string("/.stackbuild-build/src/") + prog->file);
      for (const auto& l : prog->libs) run.argv.push_back("-l" + l);
      run.timeout_seconds = 600;
      auto r = run_in_image(*o.sandbox, root, run, [&](std::string_view s) { log += s; });
      status = r.exit_status;
    } else {
      ProcessSpec p;
      p.env = current_environment();
      p.capture_stdout = p.merge_stderr = true;
      p.argv = {host_nvcc.string(), "-O2", "-cudart", "shared", "-o", (out / component).string()};
      for (const auto& g : gencode) p.argv.push_back(g);
      for (const auto& i : use_incs) p.argv.push_back("-I" + (root.root() / i.substr(1)).string());
      p.argv.push_back("-L" + links.string());
      for (const auto& d : libs)
        if (auto h = root.resolve(d); h && fs::is_directory(*h)) p.argv.push_back("-Xlinker=-rpath-link=" + h->string());
      p.argv.push_back((src / prog->file).string());
      for (const auto& l : prog->libs) p.argv.push_back("-l" + l);
      auto r = run_process(p);
      status = r.exit_status;
      log = r.output;
    }
    if (status != 0 || !fs::exists(out / component)) {
      if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
      c.error = c.compiler + " failed (status " + std::to_string(status) + "):\n" + log;
      return c;
    }
    fs::create_directories(dir.parent_path());
    std::error_code ec;
    fs::rename(out, dir, ec);  // another stackbuild may have put it there first
    if (ec && !fs::exists(bin)) throw Error("cannot keep " + bin.string() + ": " + ec.message());
  }

  // The program must use the image's CUDA runtime, not the host's.
  auto elf = read_elf(bin);
  for (const auto& n : elf ? elf->needed : std::vector<std::string>{})
    if (n.rfind("libcudart.so", 0) == 0) c.cudart = n;
  if (c.cudart.empty()) {
    c.error = "the compiled program does not link libcudart dynamically";
    return c;
  }
  for (const auto& d : libs)
    if (root.resolve(d + "/" + c.cudart)) {
      c.cudart_in_image = d + "/" + c.cudart;
      break;
    }
  if (c.cudart_in_image.empty()) {
    c.error = "the program compiled by " + c.compiler + " needs " + c.cudart + ", which the image lacks (it has " +
              fs::path(lib_path["cudart"]).filename().string() +
              "): this nvcc is another CUDA version than the image's; give --nvcc of the image's version";
    return c;
  }
  c.binary = bin;
  return c;
}

std::vector<ImageTest> builtin_tests(const ImageRoot& root, const std::vector<std::string>& components,
                                     const BuiltinOptions& o, std::vector<CompiledProgram>& compiled) {
  std::vector<ImageTest> out;
  auto version = [&](const char* c) {
    auto it = o.versions.find(c);
    return it == o.versions.end() ? std::string() : it->second;
  };
  for (const auto& comp : components) {
    ImageTest t;
    t.name = "builtin: " + comp;
    t.kind = "builtin";
    t.gpu = true;
    t.expect = "\"ok\": true";
    t.timeout = 600;
    if (const Program* p = program_of(comp)) {
      t.argv = {"/.stackbuild-tests/" + comp};
      if (!o.compile) {
        t.unavailable = "not compiled";  // only reached with a GPU, where compile is set
      } else {
        CompiledProgram c = compile_builtin(root, comp, o);
        compiled.push_back(c);
        if (!c.error.empty()) {
          t.unavailable = "the test program did not compile: " + c.error.substr(0, c.error.find('\n'));
        } else {
          t.mounts.push_back({c.binary, "/.stackbuild-tests/" + comp, true});
          std::string ld;
          for (const auto& d : o.ld_library_path) ld += (ld.empty() ? "" : ":") + d;
          for (const auto& d : c.lib_dirs) ld += (ld.empty() ? "" : ":") + d;
          t.env["LD_LIBRARY_PATH"] = ld;
        }
      }
      (void)p;
    } else if (auto py = python_tests().find(comp); py != python_tests().end()) {
      t.argv = {"python3", "-c", std::string("NAME = \"") + comp + "\"\n" + kPythonCommon + py->second};
      t.env["SB_EXPECT_CUDA"] = version("cuda");
      t.env["SB_EXPECT_CUDNN"] = version("cudnn");
      t.env["SB_EXPECT_NCCL"] = version("nccl");
      // The import and the versions first, on every host: a framework that
      // cannot load the image's libraries, or was built for another CUDA or
      // cuDNN, fails here without a GPU.
      ImageTest import = t;
      import.name = "builtin: " + comp + " import";
      import.gpu = false;
      import.timeout = 300;
      import.env["SB_PART"] = "import";
      out.push_back(std::move(import));
    } else {
      continue;  // a component without a built-in test
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace sb::verify
