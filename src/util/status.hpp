// All user-facing output goes through one Status (ninja's Status): stage code
// reports tasks and messages; the rendering (TTY progress bars, plain lines,
// JSON lines) is chosen once by the CLI. Stage code never prints.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace sb {

enum class Level { Debug, Info, Warning };
enum class StatusMode { Tty, Plain, Json };

class Status {
 public:
  virtual ~Status() = default;
  // A unit of work (a layer being written, a blob being copied). `total` is in
  // bytes, 0 when unknown. Returns an id for the calls below.
  virtual int task_begin(std::string_view label, uint64_t total) = 0;
  virtual void task_progress(int id, uint64_t done) = 0;
  virtual void task_end(int id, std::string_view result) = 0;
  virtual void message(Level level, std::string_view text) = 0;
  // A finished record for machines and humans alike, e.g. the digest of an image.
  virtual void result(std::string_view key, std::string_view value) = 0;
  // A structured record for machines: the JSON rendering writes
  // {"event": name, ...fields}; the others ignore it (they get the same facts
  // as messages and results).
  virtual void event(std::string_view name, const nlohmann::json& fields);
};

// A Status that forwards to `inner`, with `prefix` in front of every task
// label, message and result key ("cuda=12.6: layer app"), and with
// {"scope": prefix} added to every event: one display for several builds
// that run at once. `inner` must outlive it.
std::unique_ptr<Status> scoped_status(Status& inner, std::string prefix);

// The rendering that fits `out`: TTY when it is a terminal and CI is unset.
StatusMode detect_status_mode(FILE* out);
std::unique_ptr<Status> make_status(StatusMode mode, FILE* out, bool verbose = false);

// A Status that drops everything, for tests and library callers.
Status& null_status();

// "1.5 GiB", "340 MiB/s": sizes for humans.
std::string human_bytes(double bytes);

// A size from a human: "8GiB", "500M", "1.5G", "1000000" (bytes); K/M/G/T,
// with or without "i" and "B", are powers of 1024. nullopt when malformed.
std::optional<uint64_t> parse_bytes(std::string_view text);

// Seconds from `t` to now, for timings in messages and reports.
double seconds_since(std::chrono::steady_clock::time_point t);

// "1 layer", "3 layers": a count and the noun that agrees with it, for messages.
std::string counted(size_t n, std::string_view one, std::string_view many);

}  // namespace sb
