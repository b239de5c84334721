#include "cli/args.hpp"

#include <algorithm>

#include "util/error.hpp"

namespace sb::cli {

static bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Args::Args(const std::vector<std::string>& argv, const std::vector<std::string>& flags,
           const std::vector<std::string>& options, const std::vector<std::string>& repeatable) {
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name = a, value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    // A short option with its value attached: "-j2".
    if (!has_value && a[1] != '-' && a.size() > 2 && contains(options, a.substr(0, 2))) {
      name = a.substr(0, 2);
      value = a.substr(2);
      has_value = true;
    }
    if (contains(flags, name)) {
      if (has_value) throw Error("option " + name + " takes no value", ErrorKind::Usage);
      values_[name].push_back("");
    } else if (contains(options, name) || contains(repeatable, name)) {
      if (!has_value) {
        if (i + 1 >= argv.size()) throw Error("option " + name + " needs a value", ErrorKind::Usage);
        value = argv[++i];
      }
      if (values_.count(name) && !contains(repeatable, name))
        throw Error("option " + name + " given twice", ErrorKind::Usage);
      values_[name].push_back(value);
    } else {
      std::vector<std::string> known = flags;
      known.insert(known.end(), options.begin(), options.end());
      known.insert(known.end(), repeatable.begin(), repeatable.end());
      std::string s = suggest(name, known);
      throw Error("unknown option '" + name + "'" + (s.empty() ? "" : " (did you mean '" + s + "'?)"), ErrorKind::Usage);
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<int64_t> Args::integer(const std::string& name, int64_t min, int64_t max) const {
  auto v = get(name);
  if (!v) return std::nullopt;
  try {
    size_t used = 0;
    long long n = std::stoll(*v, &used, 10);
    if (used != v->size() || n < min || n > max) throw std::out_of_range(*v);
    return n;
  } catch (const std::exception&) {
    throw Error("option " + name + " wants an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                    ", not '" + *v + "'",
                ErrorKind::Usage);
  }
}

}  // namespace sb::cli
