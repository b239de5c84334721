// stackbuild cluster slurm: a release fanned out over a Slurm cluster
// (pipeline/slurm.hpp, docs/cluster.md).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <unistd.h>

#include "cli/cli.hpp"
#include "image/sbom.hpp"
#include "pipeline/release.hpp"
#include "pipeline/slurm.hpp"
#include "util/error.hpp"

namespace sb::cli {

const char* const kClusterSlurmHelp =
    "usage: stackbuild cluster slurm RECIPE.yaml --registry REGISTRY/REPO[:TAG] [options]\n"
    "\n"
    "Builds a release on a Slurm cluster: one array task per matrix point (sbatch --array), each\n"
    "running\n"
    "  stackbuild build RECIPE.yaml --locked --only POINT --no-index --record-inputs --sbom \\\n"
    "      --push-to REGISTRY/REPO [--cache-from C --cache-to C]\n"
    "and a merge job that starts when every task succeeded (--dependency=afterok) and runs\n"
    "'stackbuild merge': the matrix index over the points, pushed as a one-machine build pushes\n"
    "it (the same digest), and the release notes. The registry is the only state the jobs share\n"
    "besides the job directory (scripts, each task's command, logs), which must be on a file\n"
    "system the nodes see (the submit directory usually is). RECIPE.lock must exist and match:\n"
    "the tasks build --locked.\n"
    "Resources come from the recipe's cluster: key (cpus, memory, time, partition, gpus: the\n"
    "#SBATCH lines of the task script; a GPU when a test needs one). A re-run resumes: a point\n"
    "whose image is under its tag with the record of the same inputs (recipe, lockfile pins,\n"
    "local files; its task attaches it last) and its SBOM is not submitted again; when none is\n"
    "left, the merge runs here and nothing is submitted.\n"
    "\n"
    "options:\n"
    "  --registry REGISTRY/REPO[:TAG]  where the points and the index go (TAG: the index's tag)\n"
    "  --cache REGISTRY/REPO[:TAG]  the layer cache the tasks read and write (--cache-from and\n"
    "                       --cache-to of each task)\n"
    "  -o, --dir DIR        the job directory (default ./stackbuild-cluster/<stack>-<time>-<pid>)\n"
    "  --wait               follow the jobs until they end, print a table of the points and\n"
    "                       fail (exit 1) when a task or the merge failed, naming its log\n"
    "  --poll SECONDS       how often --wait asks the scheduler (default 5)\n"
    "  --dry-run            print the scripts and the sbatch commands; write and submit nothing\n"
    "  --rebuild            submit every point, whatever the registry holds\n"
    "  --no-sbom            the tasks attach no SBOMs (the notes then pull each image to read it)\n"
    "  --sign KEY.pem       the tasks sign their images, the merge the index (build --sign);\n"
    "                       the key must be readable at that path on the nodes\n"
    "  --stackbuild PATH    the stackbuild the jobs run (default: this one, /proc/self/exe)\n"
    "  --sbatch-arg ARG     one more option for both sbatch commands (repeatable), e.g.\n"
    "                       --sbatch-arg=--account=proj\n"
    "  --only, --set, --catalog, --index-tag, --source-date-epoch  as for build (passed on)\n"
    "  --ca-cert, --insecure-registry  registry access (passed on); credentials are not: each\n"
    "                       node reads its own (docker config, STACKBUILD_REGISTRY_*)\n"
    "  --creds USER:PASS    registry access for the resume check here only\n"
    "Also takes the options of every command (stackbuild --help).\n";

namespace {

ProcessResult run_scheduler(const std::vector<std::string>& argv) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.env = current_environment();
  spec.capture_stdout = true;
  spec.merge_stderr = true;
  try {
    return run_process(spec);
  } catch (const Error& e) {
    throw Error("cannot run " + argv.front() + " (is Slurm's client installed and on PATH?): " + e.what());
  }
}

std::string utc_stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// A job name Slurm shows as it is.
std::string job_name(const std::string& stack) {
  std::string n = "sb-";
  for (char c : stack) n += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  return n.substr(0, 64);
}

}  // namespace

int cmd_cluster_slurm(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = kCommonFlags;
  flags.insert(flags.end(), {"--wait", "--dry-run", "--rebuild", "--no-sbom"});
  std::vector<std::string> options = kCommonOptions;
  options.insert(options.end(), {"--registry", "--cache", "-o", "--dir", "--poll", "--stackbuild", "--catalog",
                                 "--index-tag", "--source-date-epoch", "--ca-cert", "--creds", "--sign"});
  Args args(argv, flags, options, {"--only", "--set", "--insecure-registry", "--sbatch-arg"});
  if (maybe_help(args, kClusterSlurmHelp)) return kExitOk;
  if (args.positional().size() != 1)
    throw Error("cluster slurm wants one recipe file (see 'stackbuild cluster slurm --help')", ErrorKind::Usage);
  auto registry_text = args.get("--registry");
  if (!registry_text)
    throw Error("cluster slurm wants --registry REGISTRY/REPO: the tasks push the points there", ErrorKind::Usage);
  const auto repo = release_registry(*registry_text);
  std::optional<registry::Reference> cache;
  if (auto c = args.get("--cache")) cache = release_registry(*c);
  double poll = 5;
  if (auto p = args.get("--poll")) {
    try {
      poll = std::stod(*p);
    } catch (const std::exception&) {
      poll = -1;
    }
    if (!(poll > 0 && poll <= 3600)) throw Error("--poll wants seconds (0.1 to 3600), not '" + *p + "'", ErrorKind::Usage);
  }
  const bool dry = args.has("--dry-run"), sbom = !args.has("--no-sbom");
  const fs::path recipe_file = fs::absolute(args.positional()[0]).lexically_normal();
  fs::path binary;
  if (auto b = args.get("--stackbuild")) {
    binary = fs::absolute(*b);
    if (!fs::is_regular_file(binary)) throw Error("--stackbuild " + *b + ": no such file", ErrorKind::Usage);
  } else {
    binary = fs::read_symlink("/proc/self/exe");
  }

  Context ctx = make_context(args);
  Status& status = *ctx.status;
  Recipe recipe = load_recipe(recipe_file);
  ReleaseRequest rq = release_request(args);
  rq.locked = true;  // the tasks build --locked: a stale lockfile fails here, before anything is submitted
  Release release = plan_release(recipe, rq);
  for (const auto& s : release.skipped)
    status.message(Level::Warning, "matrix point " + s + " is unsatisfiable (see 'stackbuild plan'): not submitted");

  // Resume: the points already in the registry, complete, with these inputs.
  std::vector<size_t> todo;
  if (args.has("--rebuild")) {
    for (size_t i = 0; i < release.points.size(); ++i) todo.push_back(i);
  } else {
    std::vector<PushedPoint> pushed;
    try {
      pushed = find_pushed_points(repo, release.points, registry_session_options(args), status);
    } catch (Error& e) {
      if (!dry) {
        e.add_trace("while looking for the points already built in " + repo.name());
        throw;
      }
      status.message(Level::Warning, std::string("cannot read ") + repo.name() + " (" + e.what() +
                                         "): --dry-run submits every point");
      pushed.assign(release.points.size(), PushedPoint{});
    }
    for (size_t i = 0; i < release.points.size(); ++i) {
      const auto& got = pushed[i];
      bool has_sbom = std::find(got.artifact_types.begin(), got.artifact_types.end(), sbom::kSpdxMediaType) !=
                      got.artifact_types.end();
      if (same_inputs(release.points[i], got) && (!sbom || has_sbom)) {
        status.message(Level::Info, "point " + release.points[i].point.id + ": " + repo.name() + ":" +
                                        release.points[i].tag + " is built from these inputs; not submitted");
        status.event("point_skipped", {{"point", release.points[i].point.id}, {"reason", "in the registry"}});
      } else {
        todo.push_back(i);
      }
    }
  }

  // The commands: each task's build, and the merge.
  std::vector<std::string> common;  // what tasks and merge share
  for (const auto& s : args.all("--set")) common.insert(common.end(), {"--set", s});
  if (auto c = args.get("--catalog")) common.insert(common.end(), {"--catalog", fs::absolute(*c).string()});
  if (auto e = args.get("--source-date-epoch")) common.insert(common.end(), {"--source-date-epoch", *e});
  if (auto c = args.get("--ca-cert")) common.insert(common.end(), {"--ca-cert", fs::absolute(*c).string()});
  for (const auto& r : args.all("--insecure-registry")) common.insert(common.end(), {"--insecure-registry", r});
  if (auto s = args.get("--store")) common.insert(common.end(), {"--store", fs::absolute(*s).string()});
  if (auto k = args.get("--sign")) {
    if (!fs::is_regular_file(*k)) throw Error("--sign " + *k + ": no such file", ErrorKind::Usage);
    common.insert(common.end(), {"--sign", fs::absolute(*k).string()});
  }
  common.insert(common.end(), {"--progress", "plain"});

  SlurmJobs jobs;
  jobs.dir = args.get("-o")       ? fs::absolute(*args.get("-o"))
             : args.get("--dir") ? fs::absolute(*args.get("--dir"))
                                 : fs::absolute("stackbuild-cluster") /
                                       (release.stack + "-" + utc_stamp() + "-" + std::to_string(getpid()));
  jobs.dir = jobs.dir.lexically_normal();
  jobs.name = job_name(release.stack);
  jobs.resources = slurm_resources(recipe);
  jobs.extra = args.all("--sbatch-arg");
  for (size_t i : todo) {
    const ReleasePoint& p = release.points[i];
    SlurmTask t{p.point.id, p.tag, {binary.string(), "build", recipe_file.string(), "--locked", "--no-index",
                                    "--record-inputs", "--push-to", repo.name()}};
    if (sbom) t.argv.push_back("--sbom");
    for (const auto& o : p.only) t.argv.insert(t.argv.end(), {"--only", o});
    if (cache) t.argv.insert(t.argv.end(), {"--cache-from", cache->str(), "--cache-to", cache->str()});
    t.argv.insert(t.argv.end(), common.begin(), common.end());
    jobs.tasks.push_back(std::move(t));
  }
  jobs.merge = {binary.string(), "merge", recipe_file.string(), "--registry", *registry_text, "--locked",
                "-o", (jobs.dir / "notes.md").string()};
  if (sbom) jobs.merge.push_back("--sbom");
  for (const auto& o : args.all("--only")) jobs.merge.insert(jobs.merge.end(), {"--only", o});
  if (auto t = args.get("--index-tag")) jobs.merge.insert(jobs.merge.end(), {"--index-tag", *t});
  jobs.merge.insert(jobs.merge.end(), common.begin(), common.end());

  if (todo.empty()) {
    status.message(Level::Info, "every point of the release is in " + repo.name() +
                                    ", built from these inputs: nothing to submit; merging here");
    if (dry) {
      printf("# nothing to submit; the merge would run here:\n%s\n", shell_line(jobs.merge).c_str());
      return kExitOk;
    }
    std::vector<std::string> m(jobs.merge.begin() + 2, jobs.merge.end());
    // The notes go beside the command, not into a job directory no job made.
    // It reports as this command does, not as a job's log.
    for (size_t i = 0; i + 1 < m.size();)
      if (m[i] == "-o" || m[i] == "--progress")
        m.erase(m.begin() + i, m.begin() + i + 2);
      else
        ++i;
    if (auto p = args.get("--progress")) m.insert(m.end(), {"--progress", *p});
    if (args.has("--json")) m.push_back("--json");
    if (args.get("-o") || args.get("--dir")) {
      fs::create_directories(jobs.dir);
      m.insert(m.end(), {"-o", (jobs.dir / "notes.md").string()});
    }
    if (auto c = args.get("--creds")) m.insert(m.end(), {"--creds", *c});
    return cmd_merge(m);
  }

  if (dry) {
    printf("# job directory: %s\n# task.sh\n%s\n# merge.sh\n%s\n", jobs.dir.string().c_str(),
           slurm_task_script(jobs).c_str(), slurm_merge_script(jobs).c_str());
    for (size_t i = 0; i < jobs.tasks.size(); ++i)
      printf("# task %zu (%s): tasks/%zu.argv\n%s\n", i, jobs.tasks[i].point.c_str(), i,
             shell_line(jobs.tasks[i].argv).c_str());
    printf("# merge.argv\n%s\n# submit\n%s\n%s\n", shell_line(jobs.merge).c_str(),
           shell_line(sbatch_array_argv(jobs)).c_str(), shell_line(sbatch_merge_argv(jobs, "ARRAY_ID")).c_str());
    return kExitOk;
  }

  write_slurm_jobs(jobs);
  auto start = std::chrono::steady_clock::now();
  Submitted ids = submit_slurm_jobs(jobs, run_scheduler, status);
  status.result("array job", ids.array_id);
  status.result("merge job", ids.merge_id);
  status.result("job directory", jobs.dir.string());
  status.event("cluster_submitted", {{"array", ids.array_id},
                                     {"merge", ids.merge_id},
                                     {"tasks", jobs.tasks.size()},
                                     {"skipped", release.points.size() - jobs.tasks.size()},
                                     {"dir", jobs.dir.string()}});
  if (!args.has("--wait")) return kExitOk;

  SlurmOutcome out = wait_for_slurm_jobs(jobs, ids, run_scheduler, poll, status);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // What the tasks left in the registry: each point's manifest, as build's summary shows it.
  std::vector<ReleasePoint> submitted;
  for (size_t i : todo) submitted.push_back(release.points[i]);
  std::vector<PushedPoint> there(submitted.size());
  try {
    there = find_pushed_points(repo, submitted, registry_session_options(args), status);
  } catch (const Error& e) {
    status.message(Level::Warning, std::string("cannot read the points back from ") + repo.name() + ": " + e.what());
  }
  std::vector<std::vector<std::string>> rows{{"POINT", "TAG", "MANIFEST", "TASK", "STATE", "EXIT", "TIME", "LOG"}};
  std::vector<std::string> failed;
  for (size_t i = 0; i < jobs.tasks.size(); ++i) {
    const auto& s = out.tasks[i];
    std::string log = (jobs.dir / "logs" / ("task-" + std::to_string(i) + ".log")).string();
    std::string manifest = "-";
    if (there[i].manifest && same_inputs(submitted[i], there[i])) manifest = there[i].manifest->digest.str().substr(0, 19);
    rows.push_back({jobs.tasks[i].point.empty() ? "-" : jobs.tasks[i].point, jobs.tasks[i].tag, manifest,
                    ids.array_id + "_" + std::to_string(i), s.state, s.exit_code.empty() ? "-" : s.exit_code,
                    s.elapsed.empty() ? "-" : s.elapsed, log});
    if (s.state != "COMPLETED")
      failed.push_back("point " + jobs.tasks[i].point + " (task " + ids.array_id + "_" + std::to_string(i) + ", " +
                       s.state + (s.exit_code.empty() ? "" : ", exit " + s.exit_code) + "): see " + log);
  }
  const std::string merge_log = (jobs.dir / "logs" / "merge.log").string();
  rows.push_back({"(merge)", "-", "-", ids.merge_id, out.merge.state, out.merge.exit_code.empty() ? "-" : out.merge.exit_code,
                  out.merge.elapsed.empty() ? "-" : out.merge.elapsed, merge_log});
  std::string table = text_table(rows);
  char secs[32];
  snprintf(secs, sizeof secs, "%.1f", seconds);
  status.message(Level::Info, "summary (" + std::to_string(jobs.tasks.size()) + " tasks, " +
                                  std::to_string(release.points.size() - jobs.tasks.size()) + " already built, " +
                                  secs + " s):\n" + table.substr(0, table.size() - 1));
  status.event("cluster_summary", {{"array", ids.array_id}, {"merge", ids.merge_id}, {"seconds", seconds},
                                   {"failed", failed.size()}});
  if (!failed.empty()) {
    std::string text = std::to_string(failed.size()) + " of " + std::to_string(jobs.tasks.size()) +
                       " tasks failed, so the release was not merged:";
    for (const auto& f : failed) text += "\n  " + f;
    throw Error(text + "\nre-run the same command to build the points that are missing");
  }
  if (out.merge.state != "COMPLETED")
    throw Error("the merge job " + ids.merge_id + " ended " + out.merge.state + ": see " + merge_log);
  status.result("notes", (jobs.dir / "notes.md").string());
  return kExitOk;
}

}  // namespace sb::cli
