#include "util/status.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace sb {

using Clock = std::chrono::steady_clock;

std::string human_bytes(double b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

void Status::event(std::string_view, const nlohmann::json&) {}

std::optional<uint64_t> parse_bytes(std::string_view text) {
  std::string t(text);
  if (t.empty() || !(isdigit(static_cast<unsigned char>(t[0])))) return std::nullopt;
  char* end = nullptr;
  double v = strtod(t.c_str(), &end);
  std::string unit(end);
  static const std::map<std::string, int> powers{{"", 0},  {"B", 0},   {"K", 1},  {"KB", 1},  {"KiB", 1},
                                                 {"M", 2}, {"MB", 2},  {"MiB", 2}, {"G", 3},   {"GB", 3},
                                                 {"GiB", 3}, {"T", 4}, {"TB", 4}, {"TiB", 4}};
  auto it = powers.find(unit);
  if (it == powers.end() || !(v >= 0)) return std::nullopt;
  double bytes = v;
  for (int i = 0; i < it->second; ++i) bytes *= 1024;
  if (bytes > 9.0e18) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

namespace {

struct Task {
  std::string label;
  uint64_t total = 0;
  uint64_t done = 0;
  Clock::time_point start = Clock::now();
  Clock::time_point last_line = start;  // plain mode: when a progress line was last printed
};

class NullStatus final : public Status {
 public:
  int task_begin(std::string_view, uint64_t) override { return 0; }
  void task_progress(int, uint64_t) override {}
  void task_end(int, std::string_view) override {}
  void message(Level, std::string_view) override {}
  void result(std::string_view, std::string_view) override {}
};

// Shared bookkeeping of the three renderings.
class BaseStatus : public Status {
 public:
  BaseStatus(FILE* out, bool verbose) : out_(out), verbose_(verbose) {}

 protected:
  FILE* out_;
  bool verbose_;
  std::mutex mu_;
  std::map<int, Task> tasks_;
  int next_id_ = 1;
};

// Seconds between a running task's progress lines in plain mode:
// STACKBUILD_PROGRESS_INTERVAL, default 10 (a CI log gets a line per task
// every 10 s, not one per chunk).
double progress_interval() {
  const char* v = getenv("STACKBUILD_PROGRESS_INTERVAL");
  if (!v || !*v) return 10;
  char* end = nullptr;
  double d = strtod(v, &end);
  if (*end != '\0' || !(d >= 0))
    throw Error(std::string("STACKBUILD_PROGRESS_INTERVAL='") + v + "' is not a number of seconds");
  return d;
}

// "3.4 GiB at 280.0 MiB/s" for `done` bytes in `seconds`; "" for none.
std::string amount_and_rate(uint64_t done, double seconds) {
  if (done == 0) return "";
  std::string s = human_bytes(static_cast<double>(done));
  if (seconds >= 0.01) s += " at " + human_bytes(static_cast<double>(done) / seconds) + "/s";
  return s;
}

class PlainStatus final : public BaseStatus {
 public:
  using BaseStatus::BaseStatus;
  int task_begin(std::string_view label, uint64_t total) override {
    std::lock_guard lk(mu_);
    int id = next_id_++;
    tasks_[id] = Task{std::string(label), total};
    if (verbose_) fprintf(out_, "[start] %.*s\n", (int)label.size(), label.data());
    return id;
  }
  void task_progress(int id, uint64_t done) override {
    std::lock_guard lk(mu_);
    Task& t = tasks_[id];
    t.done = done;
    auto now = Clock::now();
    if (std::chrono::duration<double>(now - t.last_line).count() < interval_) return;
    t.last_line = now;
    std::string of = t.total ? " of " + human_bytes(static_cast<double>(t.total)) + " (" +
                                   std::to_string(std::min<uint64_t>(100, done * 100 / t.total)) + "%)"
                             : "";
    double secs = seconds_since(t.start);
    fprintf(out_, "[....] %s: %s%s, %s/s (%.0fs)\n", t.label.c_str(), human_bytes(static_cast<double>(done)).c_str(),
            of.c_str(), human_bytes(secs > 0 ? static_cast<double>(done) / secs : 0).c_str(), secs);
    fflush(out_);
  }
  void task_end(int id, std::string_view result) override {
    std::lock_guard lk(mu_);
    Task& t = tasks_[id];
    double secs = seconds_since(t.start);
    std::string amount = amount_and_rate(t.done, secs);
    fprintf(out_, "[done] %s: %.*s (%.2fs%s%s)\n", t.label.c_str(), (int)result.size(), result.data(), secs,
            amount.empty() ? "" : ", ", amount.c_str());
    fflush(out_);
    tasks_.erase(id);
  }
  void message(Level level, std::string_view text) override {
    if (level == Level::Debug && !verbose_) return;
    std::lock_guard lk(mu_);
    fprintf(out_, "%s%.*s\n", level == Level::Warning ? "warning: " : "", (int)text.size(), text.data());
    fflush(out_);
  }
  void result(std::string_view key, std::string_view value) override {
    std::lock_guard lk(mu_);
    fprintf(out_, "%.*s: %.*s\n", (int)key.size(), key.data(), (int)value.size(), value.data());
    fflush(out_);
  }

 private:
  const double interval_ = progress_interval();
};

// Progress bars for running tasks, redrawn in place at most 10 times a second.
class TtyStatus final : public BaseStatus {
 public:
  using BaseStatus::BaseStatus;
  ~TtyStatus() override {
    std::lock_guard lk(mu_);
    clear();
  }
  int task_begin(std::string_view label, uint64_t total) override {
    std::lock_guard lk(mu_);
    int id = next_id_++;
    tasks_[id] = Task{std::string(label), total};
    redraw(true);
    return id;
  }
  void task_progress(int id, uint64_t done) override {
    std::lock_guard lk(mu_);
    tasks_[id].done = done;
    redraw(false);
  }
  void task_end(int id, std::string_view result) override {
    std::lock_guard lk(mu_);
    Task t = tasks_[id];
    tasks_.erase(id);
    clear();
    fprintf(out_, "\033[32m✓\033[0m %s: %.*s (%.2fs)\n", t.label.c_str(), (int)result.size(), result.data(),
            seconds_since(t.start));
    redraw(true);
  }
  void message(Level level, std::string_view text) override {
    if (level == Level::Debug && !verbose_) return;
    std::lock_guard lk(mu_);
    clear();
    fprintf(out_, "%s%.*s\n", level == Level::Warning ? "\033[33mwarning:\033[0m " : "", (int)text.size(),
            text.data());
    redraw(true);
  }
  void result(std::string_view key, std::string_view value) override {
    std::lock_guard lk(mu_);
    clear();
    fprintf(out_, "%.*s: %.*s\n", (int)key.size(), key.data(), (int)value.size(), value.data());
    redraw(true);
  }

 private:
  void clear() {
    for (int i = 0; i < drawn_; ++i) fputs("\033[1A\033[2K", out_);
    drawn_ = 0;
  }
  void redraw(bool force) {
    auto now = Clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    clear();
    // At most kBars bars (a push with -j 200 runs 200 tasks): more lines than
    // the terminal has would scroll, and clear() could not take them back.
    constexpr int kBars = 12;
    for (const auto& [id, t] : tasks_) {
      if (drawn_ == kBars && tasks_.size() > kBars) {
        fprintf(out_, "  ... and %zu more\n", tasks_.size() - kBars);
        ++drawn_;
        break;
      }
      double secs = seconds_since(t.start);
      double rate = secs > 0 ? t.done / secs : 0;
      std::string bar;
      if (t.total > 0) {
        int filled = static_cast<int>(30.0 * std::min<uint64_t>(t.done, t.total) / t.total);
        bar = "[" + std::string(filled, '#') + std::string(30 - filled, '.') + "] ";
      }
      fprintf(out_, "  %s %s%s %s/s\n", t.label.c_str(), bar.c_str(), human_bytes(t.done).c_str(),
              human_bytes(rate).c_str());
      ++drawn_;
    }
    fflush(out_);
  }
  int drawn_ = 0;
  Clock::time_point last_{};
};

// One JSON object per line: {"event": ..., ...}, for pipelines.
class JsonStatus final : public BaseStatus {
 public:
  using BaseStatus::BaseStatus;
  int task_begin(std::string_view label, uint64_t total) override {
    std::lock_guard lk(mu_);
    int id = next_id_++;
    tasks_[id] = Task{std::string(label), total};
    emit({{"event", "task_begin"}, {"id", id}, {"label", label}, {"total", total}});
    return id;
  }
  void task_progress(int id, uint64_t done) override {
    std::lock_guard lk(mu_);
    Task& t = tasks_[id];
    t.done = done;
    auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    emit({{"event", "task_progress"}, {"id", id}, {"done", done}, {"total", t.total}});
  }
  void task_end(int id, std::string_view result) override {
    std::lock_guard lk(mu_);
    Task& t = tasks_[id];
    emit({{"event", "task_end"}, {"id", id}, {"label", t.label}, {"result", result},
          {"seconds", seconds_since(t.start)}});
    tasks_.erase(id);
  }
  void message(Level level, std::string_view text) override {
    if (level == Level::Debug && !verbose_) return;
    std::lock_guard lk(mu_);
    const char* l = level == Level::Warning ? "warning" : level == Level::Info ? "info" : "debug";
    emit({{"event", "message"}, {"level", l}, {"text", text}});
  }
  void result(std::string_view key, std::string_view value) override {
    std::lock_guard lk(mu_);
    emit({{"event", "result"}, {"key", key}, {"value", value}});
  }
  void event(std::string_view name, const nlohmann::json& fields) override {
    std::lock_guard lk(mu_);
    nlohmann::json j = fields.is_object() ? fields : nlohmann::json{{"value", fields}};
    j["event"] = name;
    emit(j);
  }

 private:
  void emit(const nlohmann::json& j) {
    // Texts name files and URLs from outside, which need not be UTF-8:
    // the stream stays JSON, with U+FFFD for a byte that is not.
    fprintf(out_, "%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    fflush(out_);
  }
  Clock::time_point last_{};
};

class ScopedStatus final : public Status {
 public:
  ScopedStatus(Status& inner, std::string prefix) : inner_(inner), prefix_(std::move(prefix)) {}
  int task_begin(std::string_view label, uint64_t total) override {
    return inner_.task_begin(prefix_ + ": " + std::string(label), total);
  }
  void task_progress(int id, uint64_t done) override { inner_.task_progress(id, done); }
  void task_end(int id, std::string_view result) override { inner_.task_end(id, result); }
  void message(Level level, std::string_view text) override {
    inner_.message(level, prefix_ + ": " + std::string(text));
  }
  void result(std::string_view key, std::string_view value) override {
    inner_.result(prefix_ + ": " + std::string(key), value);
  }
  void event(std::string_view name, const nlohmann::json& fields) override {
    nlohmann::json j = fields.is_object() ? fields : nlohmann::json{{"value", fields}};
    if (!j.contains("scope")) j["scope"] = prefix_;
    inner_.event(name, j);
  }

 private:
  Status& inner_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Status> scoped_status(Status& inner, std::string prefix) {
  return std::make_unique<ScopedStatus>(inner, std::move(prefix));
}

StatusMode detect_status_mode(FILE* out) {
  const char* ci = getenv("CI");
  const char* term = getenv("TERM");
  if (isatty(fileno(out)) && !(ci && *ci) && !(term && std::string(term) == "dumb")) return StatusMode::Tty;
  return StatusMode::Plain;
}

std::unique_ptr<Status> make_status(StatusMode mode, FILE* out, bool verbose) {
  progress_interval();  // a bad setting is an error in every mode, not only where it is used
  switch (mode) {
    case StatusMode::Tty: return std::make_unique<TtyStatus>(out, verbose);
    case StatusMode::Json: return std::make_unique<JsonStatus>(out, verbose);
    case StatusMode::Plain: break;
  }
  return std::make_unique<PlainStatus>(out, verbose);
}

Status& null_status() {
  static NullStatus s;
  return s;
}

std::string counted(size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace sb
