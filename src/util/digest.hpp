// Content digests: a validated `Digest` value and a streaming SHA-256 hasher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sb {

// "sha256:<64 lowercase hex>". Cannot be default-constructed; parse() validates,
// so a Digest in hand is always well formed (like Nix's StorePath).
class Digest {
 public:
  static Digest parse(std::string_view text);         // throws sb::Error on bad input
  static Digest from_raw_sha256(const unsigned char* bytes32);
  static Digest of_bytes(std::string_view data);
  // A regular file's; anything else is refused. With follow_links false a
  // symlink is refused too (a walk that saw a file there, which was swapped
  // for a link to a host file since, must not hash that file).
  static Digest of_file(const std::filesystem::path& path, bool follow_links = true);
  // Each file's, in the order given, read by up to `threads` threads at once
  // (a cache key over a tree of gigabytes: one core hashes 1.8 GB/s). Throws
  // the error of the first file in that order that failed.
  static std::vector<Digest> of_files(const std::vector<std::filesystem::path>& paths, size_t threads,
                                      bool follow_links = true);

  const std::string& hex() const { return hex_; }
  std::string str() const { return "sha256:" + hex_; }
  std::string algorithm() const { return "sha256"; }

  bool operator==(const Digest&) const = default;
  auto operator<=>(const Digest&) const = default;

 private:
  explicit Digest(std::string hex) : hex_(std::move(hex)) {}
  std::string hex_;
};

void to_json(nlohmann::json& j, const Digest& d);
void from_json(const nlohmann::json& j, Digest& d);  // needs an existing Digest; see Digest::parse

// Streaming SHA-256 over OpenSSL's EVP interface.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Digest finish();  // the hasher may not be used after

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Builds a cache key from typed, delimited fields, so two different inputs can
// never hash alike ("a"+"bc" and "ab"+"c" differ), as ccache's hash_delimiter.
class KeyHasher {
 public:
  KeyHasher& field(std::string_view name, std::string_view value);
  KeyHasher& field(std::string_view name, int64_t value);
  Digest finish() { return sha_.finish(); }

 private:
  Sha256 sha_;
};

}  // namespace sb
