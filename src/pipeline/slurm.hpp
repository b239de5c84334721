// A release on Slurm (`stackbuild cluster slurm`, docs/cluster.md): a job
// array with one task per matrix point left to build, each running its
// point's `stackbuild build --only ... --locked --no-index --record-inputs
// --push-to ...`, and a merge job that runs after them all (afterok) and
// assembles the release from the registry (`stackbuild merge`).
//
// What the tasks read besides the registry is the job directory the scripts
// are written to: the script and, per task, its argv (NUL-separated) in
// tasks/<index>.argv, read with `mapfile -d ''` and run with "${argv[@]}" so
// that nothing of the recipe or the registry is ever parsed by a shell. On a
// real cluster that directory must be on a file system the nodes share (the
// submit directory usually is), as sbatch's own scripts and logs are.
//
// The scheduler's commands (sbatch, squeue, scontrol, scancel) go through a
// runner, so the orchestration is tested with a fake that records them.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/release.hpp"
#include "util/process.hpp"
#include "util/status.hpp"

namespace sb {

// Runs a scheduler command (argv[0] looked up in PATH), capturing its output.
using CommandRunner = std::function<ProcessResult(const std::vector<std::string>& argv)>;

struct SlurmTask {
  std::string point;           // its matrix point ("" without a matrix)
  std::string tag;             // where it pushes the point
  std::vector<std::string> argv;  // the task's command
};

struct SlurmJobs {
  std::filesystem::path dir;          // the job directory
  std::vector<SlurmTask> tasks;       // array index i builds tasks[i]
  std::vector<std::string> merge;     // the merge job's command
  std::vector<std::string> resources;  // #SBATCH options from the recipe's cluster:
  std::string name;                   // the job name
  std::vector<std::string> extra;     // --sbatch-arg: more sbatch options, for both jobs
};

// The options the recipe's `cluster:` asks for: --cpus-per-task, --mem,
// --time, --partition, --gres=gpu:N (gpus, else 1 when a test needs a GPU).
std::vector<std::string> slurm_resources(const Recipe& recipe);

// The job script of the array: bash, reading its argv from the job
// directory given as its first argument.
std::string slurm_task_script(const SlurmJobs& jobs);
// The merge job's script.
std::string slurm_merge_script(const SlurmJobs& jobs);

// Writes the scripts, each task's argv, the merge's and points.json into
// jobs.dir (each file written whole, then renamed into place).
void write_slurm_jobs(const SlurmJobs& jobs);

// The sbatch command lines: the array's, then the merge's with
// `--dependency=afterok:<array>` (ARRAY_ID in the text when not known).
std::vector<std::string> sbatch_array_argv(const SlurmJobs& jobs);
std::vector<std::string> sbatch_merge_argv(const SlurmJobs& jobs, const std::string& array_id);

struct Submitted {
  std::string array_id, merge_id;
};
// Submits both jobs; throws Error with sbatch's own message when it refuses.
Submitted submit_slurm_jobs(const SlurmJobs& jobs, const CommandRunner& run, Status& status);

// How a task (or the merge) ended.
struct SlurmTaskState {
  std::string state;    // COMPLETED, FAILED, CANCELLED, TIMEOUT, ... ("UNKNOWN" when the scheduler forgot it)
  std::string exit_code;  // "0:0"
  std::string elapsed;    // "00:01:02"
};

struct SlurmOutcome {
  std::vector<SlurmTaskState> tasks;  // by array index
  SlurmTaskState merge;
};

// Polls squeue every `poll_seconds` until both jobs have left the queue (a
// merge whose dependency can never be met, after a failed task, is cancelled),
// then reads how each ended (scontrol, else sacct).
SlurmOutcome wait_for_slurm_jobs(const SlurmJobs& jobs, const Submitted& ids, const CommandRunner& run,
                                 double poll_seconds, Status& status);

// `argv` as one line a POSIX shell reads back as the same words.
std::string shell_line(const std::vector<std::string>& argv);

}  // namespace sb
