// Hostile inputs at the trust boundary (DESIGN.md): what a layer may put on
// the host's disk (xattrs, devices, setuid bits) through `stackbuild unpack`
// and through the cached roots build steps run in; the store's privacy; the
// `cache:` directories one recipe may reach; the host files a recipe's
// `copy:` may read. Each was seen failing before its fix.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "build/steps.hpp"
#include "helpers.hpp"
#include "layer/extract.hpp"
#include "pipeline/build.hpp"
#include "pipeline/step_layer.hpp"
#include "store/store.hpp"
#include "tar_fixture.hpp"
#include "util/status.hpp"

using namespace sb;
using test::RawEntry;

namespace {

mode_t mode_of(const fs::path& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

}  // namespace

TEST_CASE("the store is private: 0700 when made, and an existing one is tightened", "[store][hostile]") {
  TempDir tmp;
  fs::path root = tmp.path() / "store";
  {
    Store store(root);
    for (const char* sub : {"", "blobs", "blobs/sha256", "refs", "tmp", "locks"})
      CHECK((mode_of(root / sub) & 07777) == 0700);
    auto t = store.temp_dir();
    CHECK((mode_of(t->path()) & 07777) == 0700);
  }
  ::chmod(root.c_str(), 0755);
  ::chmod((root / "tmp").c_str(), 0777);
  Store again(root);
  CHECK((mode_of(root) & 07777) == 0700);
}
