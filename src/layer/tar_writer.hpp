// Writes entries as a canonical tar stream (DESIGN.md "Layers and images"):
// entries in byte order of path (but those a framing format puts first:
// eStargz's prefetch order), pax format, no atime/ctime, no user or group
// names, xattrs sorted, hardlinks to the first path in order.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "layer/blob_writer.hpp"
#include "layer/tree.hpp"

namespace sb {

// Called now and then with the bytes of content read so far.
using ProgressFn = std::function<void(uint64_t)>;

void write_canonical_tar(const EntryMap& entries, ByteSink& sink, const ProgressFn& progress = {});

// A plain tar of named members, for formats built from files (docker-archive).
struct TarMember {
  std::string name;
  std::string data;        // used when `source` is empty
  fs::path source;
};
void write_plain_tar(const std::vector<TarMember>& members, ByteSink& sink);

// A ByteSink over an open file descriptor.
class FdSink final : public ByteSink {
 public:
  FdSink(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  void write(const void* data, size_t size) override;
 private:
  int fd_;
  std::string what_;
};

}  // namespace sb
