// A gzip file inflated by ISA-L (2.4 times zlib's speed) on a thread of its
// own, a few chunks ahead of its reader, so that inflating a layer overlaps
// writing its files. Concatenated members are read one after another, as
// gzip(1) reads them; bytes after the last member that are no gzip member
// are ignored, as libarchive ignores them. Each member's CRC-32 and length
// are checked. Without a thread (the system refused one) it inflates on the
// reader's.
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "util/file.hpp"

struct inflate_state;

namespace sb {

class GzipStream {
 public:
  // `own_thread` false: inflate on the reader's thread (what happens when
  // the system refuses a thread; the tests ask for it).
  // `ahead`: how many bytes its thread inflates ahead of the reader (at
  // least a few 1 MiB chunks); set_ahead() changes it later.
  GzipStream(const std::filesystem::path& file, std::string label, bool own_thread = true,
             size_t ahead = 0);
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  // The next inflated bytes, valid until the next call; empty at the end.
  // Throws sb::Error for corrupt or truncated data, naming the file.
  std::string_view next();

  static bool is_gzip(const std::filesystem::path& file);

  // A layer inflated ahead while the one before it is extracted gets a large
  // bound; once it is read, the usual one (0: a few chunks).
  void set_ahead(size_t bytes);

 private:
  // Inflates into one chunk; false at the end of the data.
  bool produce(std::string& out);
  void refill();
  void run();

  UniqueFd fd_;
  std::string label_;
  std::unique_ptr<inflate_state> state_;
  std::vector<unsigned char> in_;
  bool input_done_ = false;  // read() returned 0
  bool finished_ = false;    // no more members

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> ready_;
  std::vector<std::string> spare_;
  std::string current_;
  std::string error_;
  size_t ahead_chunks_;
  bool end_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace sb
