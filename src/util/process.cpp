#include "util/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/file.hpp"

extern char** environ;

namespace sb {

static std::string find_in_path(const std::string& name, const std::map<std::string, std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  auto it = env.find("PATH");
  std::string path = it != env.end() ? it->second : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  throw Error("cannot run '" + name + "': not found in PATH");
}

ProcessResult run_process(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw Error("run_process: empty argv");
  std::string exe = find_in_path(spec.argv[0], spec.env);

  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int pipefd[2] = {-1, -1};
  if (spec.capture_stdout && ::pipe2(pipefd, O_CLOEXEC) != 0) throw_errno("pipe");
  int errpipe[2];  // reports an exec failure back to the parent
  if (::pipe2(errpipe, O_CLOEXEC) != 0) throw_errno("pipe");

  UniqueFd stdin_fd;
  if (!spec.stdin_path.empty()) {
    stdin_fd.reset(::open(spec.stdin_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (stdin_fd.get() < 0) throw_errno("open " + spec.stdin_path.string());
  }
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) {
    if (stdin_fd.get() >= 0) ::dup2(stdin_fd.get(), 0);
    if (spec.capture_stdout) {
      ::dup2(pipefd[1], 1);
      if (spec.merge_stderr) ::dup2(pipefd[1], 2);
    }
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(errpipe[1], &e, sizeof e);
      ::_exit(127);
    }
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(exe.c_str(), argv.data(), envp.data());
    int e = errno;
    (void)!::write(errpipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(errpipe[1]);
  ProcessResult result;
  if (spec.capture_stdout) {
    ::close(pipefd[1]);
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(pipefd[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
    }
    ::close(pipefd[0]);
  }
  int child_errno = 0;
  ssize_t got = ::read(errpipe[0], &child_errno, sizeof child_errno);
  ::close(errpipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw_errno("waitpid");
  }
  if (got == sizeof child_errno)
    throw Error("cannot run '" + spec.argv[0] + "': " + std::strerror(child_errno));
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string s(*e);
    size_t eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return env;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::filesystem::path find_on_path(const std::string& name) {
  const std::string dirs = env_or("PATH", "");
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = std::min(dirs.find(':', start), dirs.size());
    std::filesystem::path dir = end > start ? dirs.substr(start, end - start) : ".";
    std::filesystem::path candidate = dir / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

}  // namespace sb
