#include "fetch/apt/version.hpp"

#include <cctype>

#include "util/error.hpp"
#include "util/number.hpp"

namespace sb::apt {

namespace {

struct Parts {
  std::string_view epoch, upstream, revision;
};

Parts split(std::string_view v) {
  Parts p;
  auto colon = v.find(':');
  if (colon != std::string_view::npos) {
    p.epoch = v.substr(0, colon);
    v.remove_prefix(colon + 1);
  }
  auto dash = v.rfind('-');
  if (dash != std::string_view::npos) {
    p.revision = v.substr(dash + 1);
    v = v.substr(0, dash);
  }
  p.upstream = v;
  return p;
}

// The sort weight of one non-digit character: '~' before everything (even the
// end of the string), then the end, then letters, then everything else. The
// end is the caller's (weight 0, as a digit's): dpkg's strings end at a NUL,
// ours are views, and a NUL inside one (a Packages file is outside input)
// weighs as any other character. Were it 0, it would step over the digit
// it is compared with, and the order would not be transitive.
int order(char c) {
  if (std::isdigit(static_cast<unsigned char>(c))) return 0;
  if (std::isalpha(static_cast<unsigned char>(c))) return c;
  if (c == '~') return -1;
  return c + 256;  // signed, as dpkg's: bytes from 0x80 weigh 128-255
}

// dpkg's verrevcmp: alternating runs of non-digits (compared by order()) and
// digits (compared as numbers, leading zeros ignored).
int verrevcmp(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    int first_diff = 0;
    while ((i < a.size() && !std::isdigit(static_cast<unsigned char>(a[i]))) ||
           (j < b.size() && !std::isdigit(static_cast<unsigned char>(b[j])))) {
      int ac = i < a.size() ? order(a[i]) : 0;
      int bc = j < b.size() ? order(b[j]) : 0;
      if (ac != bc) return ac - bc;
      ++i, ++j;
    }
    while (i < a.size() && a[i] == '0') ++i;
    while (j < b.size() && b[j] == '0') ++j;
    while (i < a.size() && j < b.size() && std::isdigit(static_cast<unsigned char>(a[i])) &&
           std::isdigit(static_cast<unsigned char>(b[j]))) {
      if (!first_diff) first_diff = a[i] - b[j];
      ++i, ++j;
    }
    if (i < a.size() && std::isdigit(static_cast<unsigned char>(a[i]))) return 1;
    if (j < b.size() && std::isdigit(static_cast<unsigned char>(b[j]))) return -1;
    if (first_diff) return first_diff;
  }
  return 0;
}

// An epoch's digits: none, or anything but digits, is epoch 0. Compared as
// digit strings, since an epoch from outside need not fit a long.
std::string_view epoch_digits(std::string_view e) {
  for (char c : e)
    if (!std::isdigit(static_cast<unsigned char>(c))) return "";
  return e;
}

}  // namespace

int compare_versions(std::string_view a, std::string_view b) {
  Parts pa = split(a), pb = split(b);
  if (int r = compare_digit_strings(epoch_digits(pa.epoch), epoch_digits(pb.epoch))) return r;
  if (int r = verrevcmp(pa.upstream, pb.upstream)) return r < 0 ? -1 : 1;
  int r = verrevcmp(pa.revision, pb.revision);
  return r < 0 ? -1 : r > 0 ? 1 : 0;
}

Relation parse_relation(std::string_view op) {
  if (op == "<<") return Relation::Less;
  if (op == "<=" || op == "<") return Relation::LessEq;
  if (op == "=") return Relation::Eq;
  if (op == ">=" || op == ">") return Relation::GreaterEq;
  if (op == ">>") return Relation::Greater;
  throw Error("unknown version relation '" + std::string(op) + "'");
}

std::string relation_str(Relation r) {
  switch (r) {
    case Relation::Less: return "<<";
    case Relation::LessEq: return "<=";
    case Relation::Eq: return "=";
    case Relation::GreaterEq: return ">=";
    case Relation::Greater: return ">>";
    case Relation::Any: break;
  }
  return "";
}

bool satisfies(std::string_view version, Relation op, std::string_view wanted) {
  if (op == Relation::Any) return true;
  int c = compare_versions(version, wanted);
  switch (op) {
    case Relation::Less: return c < 0;
    case Relation::LessEq: return c <= 0;
    case Relation::Eq: return c == 0;
    case Relation::GreaterEq: return c >= 0;
    case Relation::Greater: return c > 0;
    case Relation::Any: break;
  }
  return true;
}

}  // namespace sb::apt
