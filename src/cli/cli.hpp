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
extern const char* const kNotesHelp;

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
namespace sb { struct MatrixResult; struct BuildResult; }
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
// The session options and -j/--jobs, --chunk-size of a push, with the store's
// record of which repositories hold which blobs (for mounts).
registry::PushOptions push_options(const Args& args, const Store& store);
// Pushes what a build made: point i to each of `targets[i]` (REGISTRY/REPO[:TAG];
// without TAG under each of its ref names), then the matrix index (if any) to
// every repository pushed to, tagged `index_tags[REGISTRY/REPO]` or its ref name.
// Two images under one tag of a repository are refused before anything is sent.
void push_built_images(const MatrixResult& built, const std::vector<std::vector<std::string>>& targets,
                       const std::map<std::string, std::string>& index_tags, const Args& args, Context& ctx);

// Verification (cli/test.cpp).
// Refuses --report and --junit files whose directory does not exist (exit 2),
// before the tests run rather than after.
void check_report_files(const Args& args);
// The gate of build: with --push/--push-to (or
// --verify) the built images are verified as `stackbuild test` does; a
// failure throws (exit 1), naming image and test, unless --no-verify, which
// skips the tests. `reports` receives what ran.
// Point i's reports go to reports[i] and its counts ("3 passed, 2 skipped")
// to built.points[i].tests; the failure is returned, for the caller to throw
// after the summary.
std::optional<Error> gate_build(MatrixResult& built, const Args& args, Context& ctx, bool pushing,
                                std::vector<std::vector<verify::VerifyReport>>& reports);
// Pushes each report as an artifact referring to its image in each of its
// point's targets (targets[i] for point i).
void attach_built_reports(const MatrixResult& built, const std::vector<std::vector<verify::VerifyReport>>& reports,
                          const std::vector<std::vector<std::string>>& targets, const Args& args, Context& ctx);
// SBOMs (cli/sbom.cpp). The SPDX document of an image built under `tag`, from its layers in the store.
std::string built_image_sbom(const Store& store, const std::string& tag, const Image& image);
struct SbomOf {
  std::string name;
  Descriptor image;
  std::string document;
};
// build --sbom: each distinct image's SBOM added to `layout` (point i's in
// the i-th list); then, with --push, attached to the pushed images.
std::vector<std::vector<SbomOf>> add_built_sboms(const MatrixResult& built, const fs::path& layout, const Store& store,
                                                 Context& ctx);
void attach_built_sboms(const std::vector<std::vector<SbomOf>>& sboms,
                        const std::vector<std::vector<std::string>>& targets, const Args& args, Context& ctx);
struct AttachSubject {
  std::string media_type;
  Digest digest;
  uint64_t size = 0;
};
void attach_reports(const std::vector<verify::VerifyReport>& reports, const std::vector<AttachSubject>& subjects,
                    const std::string& target, const Args& args, Context& ctx);
// The images of a build that the gate's reports are of, in their order: each distinct one.
std::vector<AttachSubject> report_subjects(const BuildResult& built);
// A report into `layout` as an artifact that refers to its image (one per image; the next replaces it).
void add_report_to_layout(const fs::path& layout, const verify::VerifyReport& report, const AttachSubject& subject,
                          Context& ctx);

}  // namespace sb::cli
