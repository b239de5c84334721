// A release fanned out (issue 35): the matrix index made from descriptors read
// back from a registry is the one a one-machine build makes; a point's inputs
// digest follows what decides its bytes and nothing else; the recipe's
// cluster: key; the Slurm job files, their quoting, submission and the wait,
// against a fake scheduler that records what it was asked.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <deque>

#include <nlohmann/json.hpp>

#include "fakes.hpp"
#include "helpers.hpp"
#include "pipeline/matrix_build.hpp"
#include "pipeline/plan.hpp"
#include "pipeline/release.hpp"
#include "pipeline/slurm.hpp"
#include "util/process.hpp"

using namespace sb;

namespace {

const fs::path kSource = SB_SOURCE_DIR;

Planned plan_in(const fs::path& dir, const std::string& yaml = test::kFlavorMatrix) {
  return plan_recipe(load_recipe(test::write_flavor_matrix(dir, yaml)), PlanOptions{kSource / "layers", {}});
}

std::vector<MatrixPoint> points_of(const Planned& p) {
  std::vector<MatrixPoint> out;
  for (const auto& pp : p.plan.points) out.push_back(matrix_point(p, pp));
  return out;
}

// A scheduler that answers from a script of replies and records every command.
struct FakeScheduler {
  std::vector<std::vector<std::string>> asked;
  std::map<std::string, std::deque<ProcessResult>> replies;  // by argv[0] (+ argv[1] for scontrol)
  CommandRunner runner() {
    return [this](const std::vector<std::string>& argv) {
      asked.push_back(argv);
      auto& q = replies[argv[0]];
      if (q.empty()) return ProcessResult{1, "no reply scripted"};
      ProcessResult r = q.front();
      if (q.size() > 1) q.pop_front();
      return r;
    };
  }
};

SlurmJobs two_tasks(const fs::path& dir) {
  SlurmJobs j;
  j.dir = dir;
  j.name = "sb-mx";
  j.tasks = {{"flavor=a", "a", {"/bin/sb", "build", "r.yaml", "--only", "flavor=a"}},
             {"flavor=b", "b", {"/bin/sb", "build", "r.yaml", "--only", "flavor=b"}}};
  j.merge = {"/bin/sb", "merge", "r.yaml", "--registry", "reg/x"};
  return j;
}

}  // namespace

TEST_CASE("the matrix index from registry descriptors is the built one, byte for byte", "[cluster]") {
  TempDir tmp;
  Planned planned = plan_in(tmp.path());
  auto points = points_of(planned);
  Store store(tmp.path() / "store");
  MatrixOptions o;
  o.build.output = tmp.path() / "out";
  o.index_ref = "mx-matrix";
  MatrixResult r = build_matrix(points, store, o, null_status());
  REQUIRE_FALSE(r.failure);
  REQUIRE(r.index);
  std::vector<std::optional<IndexEntry>> entries;
  for (const auto& p : r.points) {
    const Descriptor& m = p.built->images.front().image.manifest;
    // What a registry tells: media type, digest, size; no annotations, no platform.
    entries.push_back(IndexEntry{Descriptor{m.media_type, m.digest, m.size, {}, std::nullopt}, p.tags});
  }
  TaggedIndex again = matrix_index(points, entries, "mx", "mx-matrix");
  CHECK(again.json == r.index->json);
  CHECK(again.digest == r.index->digest);

  SECTION("a point left out is not listed") {
    entries[1].reset();
    auto one = nlohmann::json::parse(matrix_index(points, entries, "mx", "mx-matrix").json);
    REQUIRE(one["manifests"].size() == 1);
    CHECK(one["manifests"][0]["annotations"]["dev.stackbuild.point"] == "flavor=a");
  }
}

TEST_CASE("a point's inputs digest follows its recipe, lock and files, not its cluster resources", "[cluster]") {
  TempDir tmp;
  auto digest_of = [&](const std::string& yaml, BuildOptions o = {}) {
    Planned planned = plan_in(tmp.path(), yaml);
    return point_inputs_digest(matrix_point(planned, planned.plan.points[0]), o).str();
  };
  const std::string base = digest_of(test::kFlavorMatrix);
  CHECK(digest_of(test::kFlavorMatrix) == base);
  {
    Planned planned = plan_in(tmp.path());
    CHECK(point_inputs_digest(matrix_point(planned, planned.plan.points[1]), {}).str() != base);  // another point
  }
  CHECK(digest_of(test::kFlavorMatrix + "cluster: {cpus: 4, memory: 8G}\n") == base);
  CHECK(digest_of(test::kFlavorMatrix + "annotations: {title: X}\n") != base);
  BuildOptions epoch;
  epoch.source_date_epoch = 5;
  CHECK(digest_of(test::kFlavorMatrix, epoch) != base);
  SECTION("a copied file's bytes are part of it") {
    Planned planned = plan_in(tmp.path());  // writes the files again
    test::write(tmp.path() / "a.txt", "flavor a, changed\n");
    CHECK(point_inputs_digest(matrix_point(planned, planned.plan.points[0]), {}).str() != base);
    // Point b does not copy a.txt: its digest stays.
    Planned fresh = plan_in(tmp.path());
    std::string b = point_inputs_digest(matrix_point(fresh, fresh.plan.points[1]), {}).str();
    test::write(tmp.path() / "a.txt", "flavor a, changed again\n");
    CHECK(point_inputs_digest(matrix_point(fresh, fresh.plan.points[1]), {}).str() == b);
  }
  SECTION("a locked point carries its lock entry") {
    Planned planned = plan_in(tmp.path());
    MatrixPoint p = matrix_point(planned, planned.plan.points[0]);
    p.inputs.lock = R"({"apt": []})";
    CHECK(point_inputs_digest(p, {}).str() != base);
  }
}

TEST_CASE("the recipe's cluster: key", "[cluster][recipe]") {
  TempDir tmp;
  auto load = [&](const std::string& cluster) {
    test::write(tmp.path() / "r.yaml", "stack: t\nlayers:\n  - {name: a, copy: [{src: f, dst: /f}]}\n" + cluster);
    test::write(tmp.path() / "f", "x\n");
    return load_recipe(tmp.path() / "r.yaml");
  };
  Recipe r = load("cluster: {cpus: 8, memory: 32G, time: \"4:00:00\", partition: gpu-a100, gpus: 2}\n");
  CHECK(slurm_resources(r) == std::vector<std::string>{"--cpus-per-task=8", "--mem=32G", "--time=4:00:00",
                                                        "--partition=gpu-a100", "--gres=gpu:2"});
  CHECK(slurm_resources(load("")).empty());
  Recipe gpu_test = load("tests: [{name: g, gpu: true, run: nvidia-smi}]\n");
  CHECK(slurm_resources(gpu_test) == std::vector<std::string>{"--gres=gpu:1"});
  CHECK(slurm_resources(load("tests: [{name: g, gpu: true, run: nvidia-smi}]\ncluster: {gpus: 0}\n")).empty());

  struct Bad {
    std::string yaml;
    const char* message;
  };
  for (const Bad& b : {Bad{"cluster: {memory: \"32 G\"}\n", "cluster.memory '32 G' is not a value Slurm takes"},
                       Bad{"cluster: {time: \"4h; rm -rf /\"}\n", "cluster.time"},
                       Bad{"cluster: {partition: \"gpu\\n#SBATCH --uid=0\"}\n", "cluster.partition"},
                       Bad{"cluster: {cpus: 0}\n", "cluster.cpus must be at least 1"},
                       Bad{"cluster: {cpu: 4}\n", "unknown key 'cpu'"}}) {
    INFO(b.yaml);
    try {
      load(b.yaml);
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK(e.location().line == 4);
      CHECK_THAT(e.what(), Catch::Contains(b.message));
    }
  }
}

TEST_CASE("a shell reads shell_line's words back as they were", "[cluster]") {
  CHECK(shell_line({"sbatch", "--array=0-2", "/a/b.sh"}) == "sbatch --array=0-2 /a/b.sh");
  CHECK(shell_line({"a b", "", "it's", "$(x)"}) == "'a b' '' 'it'\\''s' '$(x)'");
}

TEST_CASE("the job files: each task's words reach its command untouched by a shell", "[cluster]") {
  TempDir tmp;
  SlurmJobs j = two_tasks(tmp.path() / "jobs dir");
  const fs::path marker = tmp.path() / "PWNED";
  j.tasks[0].argv = {"/bin/sh", "-c", "printf '<%s>\\n' \"$@\"", "sh", "a b", "$(touch " + marker.string() + ")",
                     "it's \"q\"", "-o"};
  write_slurm_jobs(j);
  CHECK(read_file(j.dir / "tasks" / "1.argv") == std::string("/bin/sb\0build\0r.yaml\0--only\0flavor=b\0", 37));
  auto points = nlohmann::json::parse(read_file(j.dir / "points.json"));
  CHECK(points[1]["point"] == "flavor=b");
  CHECK(points[1]["log"] == (j.dir / "logs" / "task-1.log").string());
  if (find_on_path("bash").empty()) return;  // no bash: the words are checked above
  ProcessSpec spec{.argv = {"bash", (j.dir / "task.sh").string(), j.dir.string()},
                   .env = {{"PATH", "/usr/bin:/bin"}, {"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_JOB_ID", "7"},
                           {"TMPDIR", tmp.path().string()}},
                   .capture_stdout = true};
  auto r = run_process(spec);
  CHECK(r.exit_status == 0);
  // The script adds "-o" and the task's own output directory as two more words.
  CHECK_THAT(r.output, Catch::Contains("<a b>\n<$(touch " + marker.string() + ")>\n<it's \"q\">\n<-o>\n<-o>\n<" +
                                       (tmp.path() / "stackbuild-task-7-0").string() + ">\n"));
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("submission: the array, then the merge after it, and sbatch's refusal told", "[cluster]") {
  TempDir tmp;
  SlurmJobs j = two_tasks(tmp.path() / "jobs");
  j.resources = {"--mem=1G"};
  j.extra = {"--account=p"};
  FakeScheduler s;
  s.replies["sbatch"] = {{0, "41;cluster\n"}, {0, "42\n"}};
  Submitted ids = submit_slurm_jobs(j, s.runner(), null_status());
  CHECK(ids.array_id == "41");
  CHECK(ids.merge_id == "42");
  REQUIRE(s.asked.size() == 2);
  CHECK(s.asked[0] == std::vector<std::string>{"sbatch", "--parsable", "--array=0-1", "--job-name=sb-mx",
                                               "--output=" + (j.dir / "logs" / "task-%a.log").string(),
                                               "--account=p", (j.dir / "task.sh").string(), j.dir.string()});
  CHECK(s.asked[1][2] == "--dependency=afterok:41");

  FakeScheduler refusing;
  refusing.replies["sbatch"] = {{1, "sbatch: error: Batch job submission failed: Invalid account\n"}};
  try {
    submit_slurm_jobs(j, refusing.runner(), null_status());
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("sbatch refused the array of 2 tasks (exit 1): sbatch: error: Batch job "
                                         "submission failed: Invalid account"));
  }
}

TEST_CASE("waiting follows the tasks, cancels a merge a failed task left waiting", "[cluster]") {
  TempDir tmp;
  SlurmJobs j = two_tasks(tmp.path() / "jobs");
  FakeScheduler s;
  // scontrol is asked for the array, then the merge, each round.
  s.replies["scontrol"] = {
      {0, "JobId=41 ArrayJobId=41 ArrayTaskId=0-1 JobState=PENDING Reason=None ExitCode=0:0 RunTime=00:00:00\n"},
      {0, "JobId=42 JobState=PENDING Reason=Dependency ExitCode=0:0 RunTime=00:00:00\n"},
      {0, "JobId=43 ArrayJobId=41 ArrayTaskId=1 JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0 "
          "RunTime=00:00:05\nJobId=41 ArrayJobId=41 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=0:0 "
          "RunTime=00:00:09\n"},
      {0, "JobId=42 JobState=PENDING Reason=DependencyNeverSatisfied ExitCode=0:0 RunTime=00:00:00\n"}};
  s.replies["scancel"] = {{0, ""}};
  SlurmOutcome out = wait_for_slurm_jobs(j, {"41", "42"}, s.runner(), 0.001, null_status());
  REQUIRE(out.tasks.size() == 2);
  CHECK(out.tasks[0].state == "COMPLETED");
  CHECK(out.tasks[0].elapsed == "00:00:09");
  CHECK(out.tasks[1].state == "FAILED");
  CHECK(out.tasks[1].exit_code == "1:0");
  CHECK(out.merge.state == "CANCELLED");
  CHECK(std::find(s.asked.begin(), s.asked.end(), std::vector<std::string>{"scancel", "42"}) != s.asked.end());
}
