// The one way to start a process: an argv vector, an explicit environment,
// no shell in between.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct ProcessSpec {
  std::vector<std::string> argv;             // argv[0] is looked up in PATH if it has no '/'
  std::map<std::string, std::string> env;    // the whole environment; nothing is inherited
  std::filesystem::path cwd;                 // empty: the caller's
  bool capture_stdout = false;
  bool merge_stderr = false;                 // with capture: stderr goes to the same pipe
  std::filesystem::path stdin_path;          // the child's stdin; empty: the caller's
};

struct ProcessResult {
  int exit_status = -1;    // 0..255, or 128+signal when killed by one
  std::string output;      // captured stdout (and stderr if merged)
};

ProcessResult run_process(const ProcessSpec& spec);

// The current environment as a map, for callers that want to pass it on.
std::map<std::string, std::string> current_environment();

// The value of the environment variable `name`, or `fallback` when it is
// unset or empty (settings such as STACKBUILD_REDIST_URL).
std::string env_or(const char* name, const std::string& fallback);

// The first executable `name` in the directories of $PATH (as execvp finds
// it; an empty entry is the working directory), or empty.
std::filesystem::path find_on_path(const std::string& name);

}  // namespace sb
