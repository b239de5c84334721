// Redist archives into the layout compilers and frameworks expect:
// /usr/local/cuda-X.Y/{bin,include,lib64,nvvm,...} (an archive's lib/ lands
// in lib64/), /usr/local/cuda -> cuda-X.Y, and an ld.so.conf.d entry. cuDNN
// and NCCL go into the same tree (include/cudnn*.h, lib64/libcudnn*), where
// PyTorch's, TensorFlow's and JAX's build systems look first (CUDA_HOME).
// Each archive's LICENSE goes to share/doc/<component>/.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fetch/fetcher.hpp"
#include "fetch/redist/manifest.hpp"

namespace sb::redist {

namespace fs = std::filesystem;

// NVIDIA's public directory of redist products (<product>/redist/...), the
// default of the STACKBUILD_REDIST_URL setting and of `redist --base-url`.
inline constexpr const char* kPublicBaseUrl = "https://developer.download.nvidia.com/compute";

// Unpacks one .tar.xz (or .tar.gz, .zip) archive in NVIDIA's layout (one
// top directory <component>-<platform>-<version>-archive/) into `root` under
// usr/local/cuda-<cuda_xy>, through the safe extractor (archive/extract.hpp,
// extract_archive): refuses absolute paths, '..', writes through symlinks,
// symlinks leaving usr/local/cuda-<cuda_xy> (as they resolve when made; a
// '..' past a name not there yet is refused, so none can leave later),
// hardlinks to anything but a file inside, directories over links, and
// devices; no read, write or chmod follows a link. Returns the number of entries written;
// `written`, when given, receives the paths below `root` of the entries written (for splitting a
// layer by component).
size_t install_archive(const fs::path& archive, const std::string& label, const std::string& component,
                       const std::string& cuda_xy, const fs::path& root, std::vector<std::string>* written = nullptr);

// The /usr/local/cuda symlink and etc/ld.so.conf.d/000_cuda-X.Y.conf.
void finish_layout(const std::string& cuda_xy, const fs::path& root);

// usr/local/cuda-X.Y/version.json as NVIDIA's installer writes it: the
// toolkit's release ("cuda": {"name": "CUDA SDK", "version": "12.6.3"}) and
// each component unpacked ("cuda_cudart": {"version": "12.6.77"}), so that a
// tree from redist archives says what it holds, as NVIDIA's own does (for
// stackbuild test's version check and SBOMs). For the cuda product only:
// cuDNN and NCCL record their versions in their headers.
void write_version_json(const std::string& cuda_xy, const std::string& release,
                        const std::vector<std::pair<std::string, std::string>>& components, const fs::path& root);

struct Fetched {
  std::string url;
  Selected selected;
  Digest digest;
};

// Fetches the manifest (unpinned: its sha256 goes to the lockfile), selects
// `components`, fetches every archive at once with size and sha256 checked,
// and installs them into `root`. `manifest_sha256` (from a lockfile) pins the
// manifest too.
std::vector<Fetched> install_components(const std::string& base, const std::string& product,
                                        const std::string& manifest_version, const std::vector<std::string>& components,
                                        const std::string& platform, const std::string& cuda_xy, const fs::path& root,
                                        const Store& store, fetch::Fetcher& fetcher);

}  // namespace sb::redist
