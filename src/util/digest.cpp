#include "util/digest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <optional>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "util/error.hpp"
#include "util/file.hpp"
#include "util/threads.hpp"

namespace sb {

static const char kHex[] = "0123456789abcdef";

Digest Digest::parse(std::string_view text) {
  constexpr std::string_view prefix = "sha256:";
  if (text.substr(0, prefix.size()) != prefix)
    throw Error("bad digest '" + std::string(text) + "': only sha256 digests are supported");
  std::string_view hex = text.substr(prefix.size());
  if (hex.size() != 64) throw Error("bad digest '" + std::string(text) + "': want 64 hex digits");
  for (char c : hex)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      throw Error("bad digest '" + std::string(text) + "': not lowercase hex");
  return Digest(std::string(hex));
}

Digest Digest::from_raw_sha256(const unsigned char* bytes) {
  std::string hex(64, '0');
  for (int i = 0; i < 32; ++i) {
    hex[2 * i] = kHex[bytes[i] >> 4];
    hex[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return Digest(std::move(hex));
}

Digest Digest::of_bytes(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

Digest Digest::of_file(const std::filesystem::path& path, bool follow_links) {
  // O_NONBLOCK: a fifo opens at once instead of waiting for a writer, and
  // is refused below with anything else that is not a regular file (a
  // device would be read forever; a socket does not open: ENXIO).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_links ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0 && errno == ELOOP && !follow_links)
    throw Error(path.string() + ": a symbolic link where a regular file was (changed while it was read?); not followed");
  if (fd.get() < 0 && errno != ENXIO) throw_errno("open " + path.string());
  struct stat st;
  if (fd.get() < 0 || (::fstat(fd.get(), &st) == 0 && !S_ISREG(st.st_mode)))
    throw Error(path.string() + ": not a regular file (a fifo, socket or device), so it has no contents to hash");
  Sha256 h;
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + path.string());
    }
    if (n == 0) break;
    h.update(buf.data(), n);
  }
  return h.finish();
}

std::vector<Digest> Digest::of_files(const std::vector<std::filesystem::path>& paths, size_t threads,
                                     bool follow_links) {
  std::vector<std::optional<Digest>> found(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());
  std::atomic<size_t> next{0};
  run_on_threads(std::min(threads, paths.size()), [&] {
    for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
      try {
        found[i] = of_file(paths[i], follow_links);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  });
  std::vector<Digest> out;
  out.reserve(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    out.push_back(std::move(*found[i]));
  }
  return out;
}

void to_json(nlohmann::json& j, const Digest& d) { j = d.str(); }
void from_json(const nlohmann::json& j, Digest& d) { d = Digest::parse(j.get<std::string>()); }

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    throw Error("OpenSSL: cannot initialise SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, size_t size) {
  if (size) EVP_DigestUpdate(impl_->ctx, data, size);
}

Digest Sha256::finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  return Digest::from_raw_sha256(md);
}

KeyHasher& KeyHasher::field(std::string_view name, std::string_view value) {
  // name, NUL, decimal length, NUL, bytes: unambiguous whatever the bytes are.
  sha_.update(name);
  sha_.update("\0", 1);
  sha_.update(std::to_string(value.size()));
  sha_.update("\0", 1);
  sha_.update(value);
  return *this;
}

KeyHasher& KeyHasher::field(std::string_view name, int64_t value) {
  return field(name, std::to_string(value));
}

}  // namespace sb
