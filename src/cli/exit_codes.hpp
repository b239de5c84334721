// Exit codes of the stackbuild binary (documented in docs/cli.md and --help):
// chosen here, in cli/, alone. Stages throw sb::Error with an ErrorKind.
#pragma once

#include "util/error.hpp"

namespace sb::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,        // the work failed: I/O, a tool, a hostile archive, ...
  kExitUsage = 2,          // bad command line
  kExitInput = 3,          // a recipe or other input file is invalid
  kExitUnsatisfiable = 4,  // --strict: some matrix points cannot be resolved
  kExitInterrupted = 130,
};

inline int exit_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Failure: return kExitFailure;
    case ErrorKind::Usage: return kExitUsage;
    case ErrorKind::Input: return kExitInput;
    case ErrorKind::Unsatisfiable: return kExitUnsatisfiable;
    case ErrorKind::Interrupted: return kExitInterrupted;
  }
  return kExitFailure;
}

}  // namespace sb::cli
