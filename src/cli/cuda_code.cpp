// stackbuild cuda-code FILE...: the GPU code CUDA binaries carry, read with
// our own fat-binary parser (verify/fatbin.hpp), like `cuobjdump --list-elf
// --list-ptx` on a machine without the CUDA toolkit.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "util/error.hpp"
#include "verify/fatbin.hpp"

namespace sb::cli {

const char* const kCudaCodeHelp =
    "usage: stackbuild cuda-code [--json] FILE...\n"
    "\n"
    "Lists the GPU code each file carries, as cuobjdump --list-elf --list-ptx would, without\n"
    "the CUDA toolkit: the SASS (sm_XY, machine code for one GPU generation) and PTX\n"
    "(compute_XY, compiled by the driver at load time) entries of its fat binaries. A FILE is\n"
    "an ELF executable, shared library or object (its .nv_fatbin section, and fat binaries\n"
    "embedded in its data sections), a static library (ar archive), or a raw .fatbin file.\n"
    "\n"
    "One line a file:  FILE: sm_80 sm_90 compute_90   (or 'FILE: no GPU code')\n"
    "\n"
    "options:\n"
    "  --json    a JSON array instead: [{\"file\": F, \"sass\": [\"sm_80\"], \"ptx\": [\"compute_90\"]}]\n"
    "\n"
    "exit status: 0 when every file was read (with or without GPU code); 1 when a file is\n"
    "missing, unreadable, not one of the kinds above, or holds a malformed fat binary.\n";

namespace {

std::vector<std::string> names(const std::set<int>& sms, const char* prefix) {
  std::vector<std::string> out;
  for (int sm : sms) out.push_back(prefix + std::to_string(sm));
  return out;
}

}  // namespace

int cmd_cuda_code(const std::vector<std::string>& argv) {
  Args args(argv, kCommonFlags, kCommonOptions);
  if (maybe_help(args, kCudaCodeHelp)) return kExitOk;
  if (args.positional().empty()) throw Error("cuda-code needs at least one FILE", ErrorKind::Usage);
  // Every file is read before anything is printed: a bad one fails the
  // command without half a listing.
  std::vector<std::pair<std::string, verify::GpuCode>> found;
  for (const auto& f : args.positional()) found.emplace_back(f, verify::gpu_code_of_file(f));
  if (args.has("--json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& [f, c] : found) j.push_back({{"file", f}, {"sass", names(c.sass, "sm_")}, {"ptx", names(c.ptx, "compute_")}});
    print_document(j, true);
    return kExitOk;
  }
  for (const auto& [f, c] : found) {
    std::string line = f + ":";
    for (const auto& n : names(c.sass, "sm_")) line += " " + n;
    for (const auto& n : names(c.ptx, "compute_")) line += " " + n;
    if (c.empty()) line += " no GPU code";
    printf("%s\n", line.c_str());
  }
  return kExitOk;
}

}  // namespace sb::cli
