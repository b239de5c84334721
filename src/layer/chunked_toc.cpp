#include "layer/chunked_toc.hpp"

#include <ctime>

#include "util/error.hpp"
#include "util/text.hpp"
#include "util/utf8.hpp"

namespace sb {

namespace {

std::string base64(std::string_view in) {
  static const char* const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v =
        uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += abc[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16 |
                 (i + 1 < in.size() ? uint32_t(uint8_t(in[i + 1])) << 8 : 0);
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += i + 1 < in.size() ? abc[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

const char* toc_type(TarEntry::Type t) {
  switch (t) {
    case TarEntry::Type::File:
      return "reg";
    case TarEntry::Type::Dir:
      return "dir";
    case TarEntry::Type::Symlink:
      return "symlink";
    case TarEntry::Type::Hardlink:
      return "hardlink";
    case TarEntry::Type::CharDev:
      return "char";
    case TarEntry::Type::BlockDev:
      return "block";
    case TarEntry::Type::Fifo:
      return "fifo";
  }
  return "reg";
}

}  // namespace


ChunkedToc::ChunkedToc(FrameWriter& frames, size_t chunk_size, TocStyle style)
    : frames_(frames), chunk_size_(chunk_size ? chunk_size : 4 << 20), style_(std::move(style)) {}

ChunkedToc::~ChunkedToc() = default;

void ChunkedToc::begin_entry(const std::string& name, const TarEntry& e) {
  if (in_payload_ || payload_due_)
    throw Error("internal: " + style_.format + " entry '" + printable_utf8(name) +
                "' begins inside a file's content");
  // The TOC is JSON, which holds only UTF-8; a reader could not find a name
  // it cannot spell.
  for (const std::string* s : {&name, &e.link})
    if (!valid_utf8(*s))
      throw Error(style_.format +
                  " names files in a JSON table of contents, which holds only UTF-8; '" +
                  printable_utf8(*s) + "' is not (use --compression gzip or zstd for this layer)");
  nlohmann::json j{{"name", name}, {"type", toc_type(e.type)}};
  bool file = e.type == TarEntry::Type::File;
  if (file && e.size) j["size"] = e.size;
  if (e.mtime != 0 || style_.zero_modtime) j["modtime"] = rfc3339(e.mtime);
  if (!e.link.empty() && (e.type == TarEntry::Type::Symlink || e.type == TarEntry::Type::Hardlink))
    j["linkName"] = e.link;
  if (e.mode & 07777) j["mode"] = e.mode & 07777;
  if (e.uid) j["uid"] = e.uid;
  if (e.gid) j["gid"] = e.gid;
  if (e.type == TarEntry::Type::CharDev || e.type == TarEntry::Type::BlockDev) {
    if (e.dev_major) j["devMajor"] = e.dev_major;
    if (e.dev_minor) j["devMinor"] = e.dev_minor;
  }
  if (!e.xattrs.empty()) {
    nlohmann::json x = nlohmann::json::object();
    for (const auto& [k, v] : e.xattrs) {
      if (!valid_utf8(k))
        throw Error(style_.format + ": the xattr name '" + printable_utf8(k) + "' of '" +
                    printable_utf8(name) +
                    "' is not UTF-8, which its JSON table of contents cannot hold");
      x[k] = base64(v);
    }
    j["xattrs"] = std::move(x);
  }
  Item item;
  item.meta = std::move(j);
  item.file = file;
  if (file && e.size == 0 && style_.empty_digest) item.digest = Digest::of_bytes("").str();
  items_.push_back(std::move(item));
  if (file && e.size) {
    payload_due_ = true;
    payload_size_ = e.size;
    file_ = items_.size() - 1;
  }
}

void ChunkedToc::begin_payload() {
  if (!payload_due_) throw Error("internal: " + style_.format + ": content where no file has any");
  payload_due_ = false;
  in_payload_ = true;
  payload_done_ = 0;
  file_hash_ = payload_size_ > chunk_size_ ? std::make_unique<Sha256>() : nullptr;
  start_chunk();
}

void ChunkedToc::start_chunk() {
  size_t frame = frames_.cut();
  // A chunk's digest, or the digest of a file that is one chunk: a worker's.
  if (style_.chunk_entries || payload_size_ <= chunk_size_) frames_.hash_open_frame();
  chunk_done_ = 0;
  if (payload_done_ == 0) {
    Item& f = items_[file_];
    f.payload = true;
    f.frame = frame;
    f.chunks = 1;
    return;
  }
  if (!style_.chunk_entries) return;  // another frame of the same content
  Item& f = items_[file_];
  ++f.chunks;
  Item c;
  c.meta = nlohmann::json{{"name", f.meta["name"]}, {"type", "chunk"}};
  c.payload = true;
  c.frame = frame;
  c.chunk_offset = payload_done_;
  items_.push_back(std::move(c));
}

void ChunkedToc::write(const char* data, size_t size) {
  while (size > 0) {
    size_t take = size;
    if (in_payload_) {
      if (chunk_done_ == chunk_size_) start_chunk();
      take = static_cast<size_t>(
          std::min<uint64_t>({size, chunk_size_ - chunk_done_, payload_size_ - payload_done_}));
      if (take == 0)
        throw Error("internal: " + style_.format + ": more content than the file's size");
      if (file_hash_) file_hash_->update(data, take);
      chunk_done_ += take;
      payload_done_ += take;
    } else if (frames_.open_size() >= chunk_size_) {
      frames_.cut();  // a long run of headers: frames may end anywhere outside content
    }
    frames_.write(data, take);
    data += take;
    size -= take;
  }
}

void ChunkedToc::end_payload() {
  if (!in_payload_ || payload_done_ != payload_size_)
    throw Error("internal: " + style_.format + ": a file's content ended after " +
                std::to_string(payload_done_) + " of " + std::to_string(payload_size_) + " bytes");
  in_payload_ = false;
  Item& f = items_[file_];
  f.end_frame = frames_.cut();
  if (file_hash_) f.digest = file_hash_->finish().str();
  file_hash_.reset();
  // Every chunk but the last one is chunk_size_ long.
  if (f.chunks > 1) {
    size_t k = 0;
    for (size_t i = file_; i < items_.size(); ++i, ++k)
      items_[i].chunk_size =
          k + 1 < f.chunks ? chunk_size_ : payload_size_ - items_[i].chunk_offset;
  }
}

nlohmann::json ChunkedToc::entries() const {
  nlohmann::json out = nlohmann::json::array();
  for (const Item& it : items_) {
    nlohmann::json j = it.meta;
    if (it.payload) {
      j["offset"] = frames_.offset_of(it.frame);
      if (style_.chunk_entries) {
        if (it.chunk_offset) j["chunkOffset"] = it.chunk_offset;
        if (it.chunk_size) j["chunkSize"] = it.chunk_size;
        j["chunkDigest"] = frames_.digest_of(it.frame).str();
      }
      if (it.file) {
        j["digest"] = it.digest ? *it.digest : frames_.digest_of(it.frame).str();
        if (style_.end_offsets) j["endOffset"] = frames_.offset_of(it.end_frame);
      }
    } else if (it.digest) {
      j["digest"] = *it.digest;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace sb
