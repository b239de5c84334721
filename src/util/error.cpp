#include "util/error.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace sb {

std::string SourceLocation::str() const {
  if (!known()) return file;
  std::string s = file + ":" + std::to_string(line);
  if (column > 0) s += ":" + std::to_string(column);
  return s;
}

std::string Error::render() const {
  std::string out = what();
  for (const auto& t : traces_) out += "\n  " + t;
  return out;
}

static std::string read_line(const SourceLocation& loc) {
  if (!loc.known() || loc.file.empty()) return {};
  std::ifstream in(loc.file);
  std::string line;
  for (int i = 0; i < loc.line && std::getline(in, line); ++i) {
  }
  if (!in) return {};
  if (line.ends_with('\r')) line.pop_back();  // a CRLF file
  // Quoted on a terminal: a control character (a NUL would end the message
  // there) shows as '?', one column, so the caret stays under its place.
  for (char& c : line)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F) c = '?';
  return line;
}

InputError::InputError(SourceLocation loc, const std::string& message, std::string hint)
    : Error(loc.str() + ": " + message, ErrorKind::Input),
      loc_(std::move(loc)),
      message_(message),
      hint_(std::move(hint)),
      quoted_(read_line(loc_)) {}

std::string InputError::render() const {
  std::string out = what();
  if (!quoted_.empty()) {
    out += "\n    " + quoted_;
    if (loc_.column > 0) {
      std::string pad;
      for (int i = 1; i < loc_.column && i - 1 < static_cast<int>(quoted_.size()); ++i)
        pad += quoted_[i - 1] == '\t' ? '\t' : ' ';
      out += "\n    " + pad + "^";
    }
  }
  if (!hint_.empty()) out += "\n  " + hint_;
  for (const auto& t : traces()) out += "\n  " + t;
  return out;
}

void throw_errno(const std::string& what, int err) {
  std::string msg = what + ": " + std::strerror(err);
  if (err == EMFILE) {  // say which limit, and what to do about it
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      msg += " (the limit on open files, ulimit -n, is " + std::to_string(rl.rlim_cur) + ")";
    msg += "; raise the limit, or run fewer jobs at once (-j)";
  } else if (err == ENFILE) {
    msg += " (the system-wide limit on open files, fs.file-max, is reached)";
  }
  throw Error(msg);
}
void throw_errno(const std::string& what) { throw_errno(what, errno); }

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = word.size() / 3 + 2;  // allow about one typo in three letters
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

}  // namespace sb
