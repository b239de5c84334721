// How a tar writer and a layer format that frames each entry (eStargz,
// zstd:chunked) talk: the format learns where entries and their contents
// begin in the stream, may have some entries go first, and may add members
// of its own before, among and after the entries (eStargz's landmarks and
// table of contents).
#pragma once

#include <string>
#include <vector>

#include "archive/entry.hpp"

namespace sb {

// A regular file the format adds to the tar stream, content inline.
struct ExtraMember {
  std::string name;
  std::string data;
};

// The tar writer calls these in stream order, with every byte written before
// a call already handed to the sink: it writes unblocked when a sink frames.
class EntryFramer {
 public:
  virtual ~EntryFramer() = default;
  // Paths (EntryMap keys) to write before all others, in this order
  // (eStargz's prefetch order); paths the layer lacks are passed over.
  virtual const std::vector<std::string>& prioritized() const {
    static const std::vector<std::string> none;
    return none;
  }
  // Members to write before the first entry; `prioritized`: how many
  // entries of the layer go first.
  virtual std::vector<ExtraMember> leading_members(size_t prioritized) = 0;
  // Members to write after those prioritized entries, when there are any.
  virtual std::vector<ExtraMember> after_prioritized() { return {}; }
  // Before the header of an entry; `name` is the path as the header holds it
  // (directories end in '/').
  virtual void begin_entry(const std::string& name, const TarEntry& entry) = 0;
  // Around the content of a regular file with content (not its padding).
  virtual void begin_payload() = 0;
  virtual void end_payload() = 0;
  // Members to write after the last entry and its padding, before the
  // end-of-archive blocks. Called once.
  virtual std::vector<ExtraMember> closing_members() = 0;
};

}  // namespace sb
