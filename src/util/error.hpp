// The one error type every stage throws, with the context a user needs.
//
// A stage throws an Error (or a subclass) saying what went wrong; callers add
// "while ..." lines as it unwinds (like Nix's addTrace):
//
//   try { build_layer(l); }
//   catch (sb::Error& e) { e.add_trace("while building layer '" + l.name + "'"); throw; }
//
// The CLI prints `stackbuild: error: <what>` and the traces, innermost first.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace sb {

// What kind of failure an Error is. Stages say which; only the command line
// (cli/exit_codes.hpp) turns a kind into an exit code.
enum class ErrorKind {
  Failure,        // the work failed: I/O, a tool, a hostile archive, ...
  Usage,          // a bad request: an option's value, a combination of options
  Input,          // a recipe or other input file is invalid
  Unsatisfiable,  // matrix points cannot be resolved
  Interrupted,    // Ctrl-C or SIGTERM
};

// Where something came from in a text file: 1-based line and column.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  bool known() const { return line > 0; }
  std::string str() const;  // "file:line:col" or just "file"
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::Failure)
      : std::runtime_error(what), kind_(kind) {}

  void add_trace(std::string line) { traces_.push_back(std::move(line)); }
  const std::vector<std::string>& traces() const { return traces_; }
  ErrorKind kind() const { return kind_; }

  // The message and the traces as the CLI prints them (no "stackbuild:" prefix).
  virtual std::string render() const;

 private:
  std::vector<std::string> traces_;
  ErrorKind kind_;
};

// An error in an input file: renders as `file:line:col: message`, then the
// offending line quoted with a caret under the column, then an optional hint.
class InputError : public Error {
 public:
  InputError(SourceLocation loc, const std::string& message, std::string hint = {});

  const SourceLocation& location() const { return loc_; }
  const std::string& message() const { return message_; }
  std::string render() const override;

 private:
  SourceLocation loc_;
  std::string message_;
  std::string hint_;
  std::string quoted_;  // the source line, read when the error is made
};

// errno-based failure of a system call on a path: "open /x: No such file or directory".
[[noreturn]] void throw_errno(const std::string& what, int err);
[[noreturn]] void throw_errno(const std::string& what);

// The closest candidate by edit distance, when close enough to be a likely typo.
std::string suggest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace sb
