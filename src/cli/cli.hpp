// The stackbuild command line: one file per subcommand, each with its help.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/exit_codes.hpp"
#include "image/image.hpp"
#include "pipeline/plan.hpp"
#include "store/store.hpp"
#include "util/status.hpp"
#include "verify/report.hpp"

#include <nlohmann/json.hpp>

namespace sb::cli {

int main(int argc, char** argv);

// Options every command takes.
extern const std::vector<std::string> kCommonFlags;    // --help, --verbose, --json
extern const std::vector<std::string> kCommonOptions;  // --store, --progress

struct Context {
  std::unique_ptr<Status> status;
  fs::path store_root;
  bool json = false;  // --json: stdout holds JSON lines and nothing else
  // The store, held shared for this Store's life (a running gc is waited for, with a message).
  Store store() const;
};
Context make_context(const Args& args);

// A command's own JSON document on stdout: on one line with --json (stdout
// is JSON lines then, beside the events), indented for a reader otherwise.
void print_document(const nlohmann::json& doc, bool json_lines);

struct Command {
  const char* name;
  const char* summary;
  const char* help;  // full text of `stackbuild <cmd> --help`
  int (*run)(const std::vector<std::string>& argv);
};
const std::vector<Command>& commands();

int cmd_build(const std::vector<std::string>& argv);
int cmd_layer(const std::vector<std::string>& argv);
int cmd_unpack(const std::vector<std::string>& argv);
int cmd_extract(const std::vector<std::string>& argv);
int cmd_version(const std::vector<std::string>& argv);
int cmd_gpu(const std::vector<std::string>& argv);
int cmd_test(const std::vector<std::string>& argv);
int cmd_run(const std::vector<std::string>& argv);
int cmd_plan(const std::vector<std::string>& argv);
int cmd_lock(const std::vector<std::string>& argv);
int cmd_apt_resolve(const std::vector<std::string>& argv);  // cli/apt.cpp (issue 4)
int cmd_push(const std::vector<std::string>& argv);
int cmd_pull(const std::vector<std::string>& argv);
int cmd_pip(const std::vector<std::string>& argv);     // cli/pip.cpp (issue 5)
int cmd_redist(const std::vector<std::string>& argv);  // cli/pip.cpp (issue 5)
int cmd_gc(const std::vector<std::string>& argv);      // cli/gc.cpp
int cmd_cuda_code(const std::vector<std::string>& argv);  // cli/cuda_code.cpp
int cmd_sbom(const std::vector<std::string>& argv);       // cli/sbom.cpp
int cmd_notes(const std::vector<std::string>& argv);      // cli/notes.cpp
int cmd_sign(const std::vector<std::string>& argv);       // cli/sign.cpp
int cmd_verify(const std::vector<std::string>& argv);     // cli/sign.cpp
int cmd_cluster(const std::vector<std::string>& argv);    // cli/cluster.cpp: github, gitlab, k8s; slurm below
int cmd_provenance(const std::vector<std::string>& argv);  // cli/provenance.cpp
int cmd_merge(const std::vector<std::string>& argv);      // cli/merge.cpp
// `stackbuild cluster slurm ...`: the arguments after "slurm" (cli/cluster_slurm.cpp).
int cmd_cluster_slurm(const std::vector<std::string>& args);

extern const char* const kBuildHelp;
extern const char* const kLayerHelp;
extern const char* const kUnpackHelp;
extern const char* const kExtractHelp;
extern const char* const kGpuHelp;
extern const char* const kTestHelp;
extern const char* const kRunHelp;
extern const char* const kPlanHelp;
extern const char* const kLockHelp;
extern const char* const kAptResolveHelp;
extern const char* const kPushHelp;
extern const char* const kPullHelp;
extern const char* const kPipHelp;
extern const char* const kRedistHelp;
extern const char* const kGcHelp;
extern const char* const kCudaCodeHelp;
extern const char* const kSbomHelp;
extern const char* const kSignHelp;
extern const char* const kVerifyHelp;
extern const char* const kProvenanceHelp;
extern const char* const kNotesHelp;
extern const char* const kClusterHelp;
extern const char* const kMergeHelp;
extern const char* const kClusterSlurmHelp;

// " (pid 12)", " (pids 12, 34)", or "" when none is known.
std::string pid_list(const std::vector<long>& pids);

// --catalog DIR and --set KEY=VALUE, shared by plan, lock and build.
extern const std::vector<std::string> kPlanOptions;  // --catalog (--set is repeatable)
PlanOptions plan_options(const Args& args);

// Prints a command's help when --help was given; returns true if it did.
bool maybe_help(const Args& args, const char* help);

// Registry access (--creds, --ca-cert, --insecure-registry) for push, pull and build --push.
}  // namespace sb::cli
namespace sb::registry { struct SessionOptions; struct PushOptions; struct ListedImage; }
namespace sb::cli {
registry::SessionOptions registry_session_options(const Args& args);
// Whether an IMAGE argument names a registry's image (REGISTRY/REPO[:TAG])
// rather than a layout (DIR or DIR:REF): not a layout directory, with a '/',
// not a file, and not a path whose first part is here ("out/pytorch:1" with
// out/ here is a layout that is missing, not a Docker Hub name).
bool is_registry_arg(const std::string& what);
// The SBOM document attached to `image` in the registry `where`
// (registry::list_images asked for the SBOM types): SPDX first, else
// CycloneDX. One that does not parse, or that describes another image, is a
// warning and passed over. "" when there is none (cli/notes.cpp).
std::string attached_sbom(const registry::ListedImage& image, const std::string& where, Context& ctx);
// The session options and -j/--jobs, --chunk-size of a push (its `store`,
// the record of which repositories hold which blobs, is the caller's to set).
registry::PushOptions push_options(const Args& args);

// A fan-out's release (cli/merge.cpp, for merge and cluster slurm): --set,
// --catalog, --only, --locked, --index-tag and the layer options as a
// ReleaseRequest; --registry REGISTRY/REPO[:TAG] checked.
}  // namespace sb::cli
namespace sb { struct ReleaseRequest; }
namespace sb::registry { struct Reference; }
namespace sb::cli {
ReleaseRequest release_request(const Args& args);
registry::Reference release_registry(const std::string& text);

// Verification (cli/test.cpp).
// Refuses --report and --junit files whose directory does not exist (exit 2),
// before the tests run rather than after.
void check_report_files(const Args& args);
// A report as its table for people (stdout), or in JSON mode as a "verify"
// event: there stdout holds JSON lines and nothing else.
void show_report(const verify::VerifyReport& report, Context& ctx);

}  // namespace sb::cli
