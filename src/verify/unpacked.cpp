#include "verify/unpacked.hpp"

#include "layer/extract.hpp"
#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::verify {

fs::path unpacked_root(const Store& store, const LayoutImage& image) {
  fs::path roots = store.root() / "roots";
  fs::create_directories(roots);
  fs::path dest = roots / image.manifest_digest.hex();
  if (fs::is_directory(dest)) return dest;
  auto lock = store.lock("root-" + image.manifest_digest.hex());
  if (fs::is_directory(dest)) return dest;  // another stackbuild unpacked it meanwhile
  TempDir tmp(roots, ".unpack-");
  fs::path root = tmp.path() / "rootfs";
  fs::create_directory(root);
  ExtractOptions o;
  ExtractStats stats;
  for (const auto& blob : image.layer_blobs) extract_layer(blob, root, o, stats);
  fs::rename(root, dest);
  return dest;
}

}  // namespace sb::verify
