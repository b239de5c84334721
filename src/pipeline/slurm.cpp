#include "pipeline/slurm.hpp"

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/file.hpp"
#include "util/interrupt.hpp"

namespace sb {

namespace {

// The script both jobs run: the job directory is $1, the argv file $2 (a
// name inside it). Nothing of the argv is seen by the shell but as words.
std::string runner_script(const SlurmJobs& jobs, const std::string& what, const std::string& argv_file,
                          bool resources) {
  std::string s = "#!/bin/bash\n# Written by 'stackbuild cluster slurm': " + what + ".\n";
  if (resources)
    for (const auto& r : jobs.resources) s += "#SBATCH " + r + "\n";
  s += "# Submitted as: sbatch [options] SCRIPT JOBDIR (see submit.sh). The command is read from\n"
       "# " + argv_file + " in JOBDIR, NUL-separated words, and run as it is: no shell parses it.\n"
       "set -euo pipefail\n"
       "jobdir=\"$1\"\n";
  s += resources ? "argv_file=\"$jobdir/tasks/${SLURM_ARRAY_TASK_ID:?not an array task}.argv\"\n"
                 : "argv_file=\"$jobdir/merge.argv\"\n";
  s += "mapfile -d '' -t argv < \"$argv_file\"\n"
       "printf 'stackbuild cluster job on %s:' \"$(hostname)\"; printf ' %q' \"${argv[@]}\"; echo\n";
  if (resources)  // the task's OCI layout: its own, on the node, removed after the push
    s += "out=\"${TMPDIR:-/tmp}/stackbuild-task-${SLURM_ARRAY_JOB_ID}-${SLURM_ARRAY_TASK_ID}\"\n"
         "trap 'rm -rf -- \"$out\"' EXIT\n"
         "\"${argv[@]}\" -o \"$out\"\n";
  else
    s += "exec \"${argv[@]}\"\n";
  return s;
}

std::string nul_joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (a.find('\0') != std::string::npos) throw Error("a task argument holds a NUL byte");
    out += a;
    out.push_back('\0');
  }
  return out;
}

bool terminal(const std::string& state) {
  static const std::set<std::string> running{"PENDING",   "RUNNING",  "CONFIGURING", "COMPLETING", "SUSPENDED",
                                             "REQUEUED",  "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING",
                                             "STAGE_OUT", "STOPPED"};
  return !state.empty() && !running.count(state);
}

// "Key=value" words of one `scontrol show job -o` line.
std::map<std::string, std::string> job_fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  while (in >> word)
    if (auto eq = word.find('='); eq != std::string::npos && !out.count(word.substr(0, eq)))
      out[word.substr(0, eq)] = word.substr(eq + 1);
  return out;
}

// The array indexes of "3", "0-4", "1,3,5-7%2".
std::vector<size_t> task_indexes(std::string text) {
  if (auto pct = text.find('%'); pct != std::string::npos) text.resize(pct);
  std::vector<size_t> out;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      auto dash = part.find('-');
      size_t a = std::stoul(part.substr(0, dash)), b = dash == std::string::npos ? a : std::stoul(part.substr(dash + 1));
      for (size_t i = a; i <= b && i < a + 100000; ++i) out.push_back(i);
    } catch (const std::exception&) {
    }
  }
  return out;
}

struct JobView {
  std::map<size_t, SlurmTaskState> tasks;  // array jobs: by index
  std::optional<SlurmTaskState> job;       // a plain job
  std::string reason;                      // a plain job's Reason
};

// What scontrol knows of job `id` now; nullopt when it knows nothing (never
// there, or purged).
std::optional<JobView> scontrol_view(const std::string& id, const CommandRunner& run) {
  auto r = run({"scontrol", "show", "job", "-o", id});
  if (r.exit_status != 0) return std::nullopt;
  JobView v;
  std::istringstream in(r.output);
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    auto f = job_fields(line);
    if (!f.count("JobState")) continue;
    any = true;
    SlurmTaskState s{f["JobState"], f["ExitCode"], f["RunTime"]};
    if (f.count("ArrayTaskId") && f["ArrayTaskId"] != "(null)") {
      for (size_t i : task_indexes(f["ArrayTaskId"])) v.tasks[i] = s;
    } else {
      v.job = s;
      v.reason = f["Reason"];
    }
  }
  if (!any) return std::nullopt;
  return v;
}

// sacct's account of job `id` (a cluster with accounting), for what scontrol forgot.
std::map<std::string, SlurmTaskState> sacct_view(const std::string& id, const CommandRunner& run) {
  std::map<std::string, SlurmTaskState> out;  // "123_4" or "123" -> state
  auto r = run({"sacct", "-n", "-P", "-X", "-j", id, "-o", "JobID,State,ExitCode,Elapsed"});
  if (r.exit_status != 0) return out;
  std::istringstream in(r.output);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream l(line);
    for (std::string x; std::getline(l, x, '|');) f.push_back(x);
    if (f.size() < 4) continue;
    std::string state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 0"
    out[f[0]] = {state, f[2], f[3]};
  }
  return out;
}

}  // namespace

std::string shell_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "_-./:=,@%+") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::vector<std::string> slurm_resources(const Recipe& recipe) {
  const ClusterSpec& c = recipe.cluster;
  std::vector<std::string> out;
  if (c.cpus) out.push_back("--cpus-per-task=" + std::to_string(*c.cpus));
  if (!c.memory.empty()) out.push_back("--mem=" + c.memory);
  if (!c.time.empty()) out.push_back("--time=" + c.time);
  if (!c.partition.empty()) out.push_back("--partition=" + c.partition);
  int64_t gpus = 0;
  if (c.gpus) {
    gpus = *c.gpus;
  } else {
    for (const auto& t : recipe.tests) gpus = gpus || t.gpu ? 1 : 0;
  }
  if (gpus > 0) out.push_back("--gres=gpu:" + std::to_string(gpus));
  return out;
}

std::string slurm_task_script(const SlurmJobs& jobs) {
  return runner_script(jobs, "one array task per matrix point, each building and pushing its point", "tasks/<index>.argv",
                       true);
}

std::string slurm_merge_script(const SlurmJobs& jobs) {
  return runner_script(jobs, "the merge job, after every task succeeded (afterok)", "merge.argv", false);
}

std::vector<std::string> sbatch_array_argv(const SlurmJobs& jobs) {
  std::vector<std::string> argv{"sbatch", "--parsable", "--array=0-" + std::to_string(jobs.tasks.size() - 1),
                                "--job-name=" + jobs.name, "--output=" + (jobs.dir / "logs" / "task-%a.log").string()};
  argv.insert(argv.end(), jobs.extra.begin(), jobs.extra.end());
  argv.push_back((jobs.dir / "task.sh").string());
  argv.push_back(jobs.dir.string());
  return argv;
}

std::vector<std::string> sbatch_merge_argv(const SlurmJobs& jobs, const std::string& array_id) {
  std::vector<std::string> argv{"sbatch", "--parsable", "--dependency=afterok:" + array_id,
                                "--job-name=" + jobs.name + "-merge",
                                "--output=" + (jobs.dir / "logs" / "merge.log").string()};
  argv.insert(argv.end(), jobs.extra.begin(), jobs.extra.end());
  argv.push_back((jobs.dir / "merge.sh").string());
  argv.push_back(jobs.dir.string());
  return argv;
}

void write_slurm_jobs(const SlurmJobs& jobs) {
  fs::create_directories(jobs.dir / "tasks");
  fs::create_directories(jobs.dir / "logs");
  nlohmann::json points = nlohmann::json::array();
  for (size_t i = 0; i < jobs.tasks.size(); ++i) {
    write_file_atomic(jobs.dir / "tasks" / (std::to_string(i) + ".argv"), nul_joined(jobs.tasks[i].argv));
    points.push_back({{"index", i},
                      {"point", jobs.tasks[i].point},
                      {"tag", jobs.tasks[i].tag},
                      {"command", shell_line(jobs.tasks[i].argv)},
                      {"log", (jobs.dir / "logs" / ("task-" + std::to_string(i) + ".log")).string()}});
  }
  write_file_atomic(jobs.dir / "points.json", points.dump(2) + "\n");
  write_file_atomic(jobs.dir / "merge.argv", nul_joined(jobs.merge));
  write_file_atomic(jobs.dir / "task.sh", slurm_task_script(jobs), 0755);
  write_file_atomic(jobs.dir / "merge.sh", slurm_merge_script(jobs), 0755);
  std::string submit = "#!/bin/sh\n# What 'stackbuild cluster slurm' ran to submit the jobs (again: the same).\nset -e\n";
  submit += "array=$(" + shell_line(sbatch_array_argv(jobs)) + ")\n";
  std::string merge = shell_line(sbatch_merge_argv(jobs, "ARRAY"));
  merge.replace(merge.find("afterok:ARRAY"), 13, "afterok:\"${array%%;*}\"");
  submit += merge + "\n";
  write_file_atomic(jobs.dir / "submit.sh", submit, 0755);
}

Submitted submit_slurm_jobs(const SlurmJobs& jobs, const CommandRunner& run, Status& status) {
  auto sbatch = [&](const std::vector<std::string>& argv, const std::string& what) {
    status.message(Level::Info, "submitting " + what + ": " + shell_line(argv));
    auto r = run(argv);
    std::string out = r.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (r.exit_status != 0)
      throw Error("sbatch refused " + what + " (exit " + std::to_string(r.exit_status) + "): " +
                  (out.empty() ? "no message" : out));
    std::string id = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
    id = id.substr(0, id.find(';'));  // --parsable: "ID" or "ID;CLUSTER"
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      throw Error("sbatch answered '" + out + "' for " + what + ", not a job id");
    return id;
  };
  Submitted s;
  s.array_id = sbatch(sbatch_array_argv(jobs), "the array of " + std::to_string(jobs.tasks.size()) + " tasks");
  try {
    s.merge_id = sbatch(sbatch_merge_argv(jobs, s.array_id), "the merge job");
  } catch (Error& e) {
    e.add_trace("the array " + s.array_id + " is submitted; cancel it with 'scancel " + s.array_id +
                "' or let it run and run 'stackbuild merge' yourself");
    throw;
  }
  return s;
}

SlurmOutcome wait_for_slurm_jobs(const SlurmJobs& jobs, const Submitted& ids, const CommandRunner& run,
                                 double poll_seconds, Status& status) {
  SlurmOutcome out;
  out.tasks.assign(jobs.tasks.size(), SlurmTaskState{"UNKNOWN", "", ""});
  out.merge = {"UNKNOWN", "", ""};
  std::string last;
  for (;;) {
    check_interrupted();
    auto array = scontrol_view(ids.array_id, run);
    auto merge = scontrol_view(ids.merge_id, run);
    if (array)
      for (const auto& [i, s] : array->tasks)
        if (i < out.tasks.size()) out.tasks[i] = s;
    if (merge && merge->job) out.merge = *merge->job;
    size_t done = 0, failed = 0;
    for (const auto& t : out.tasks) {
      done += terminal(t.state) ? 1 : 0;
      failed += terminal(t.state) && t.state != "COMPLETED" ? 1 : 0;
    }
    std::string line = std::to_string(done) + " of " + std::to_string(out.tasks.size()) + " tasks done" +
                       (failed ? " (" + std::to_string(failed) + " failed)" : "") + "; merge " + out.merge.state;
    if (line != last) status.message(Level::Info, line), last = line;
    // A failed task leaves the merge waiting for ever (afterok can never be met).
    if (done == out.tasks.size() && failed && !terminal(out.merge.state)) {
      run({"scancel", ids.merge_id});
      out.merge.state = "CANCELLED";
      break;
    }
    if ((done == out.tasks.size() || !array) && (terminal(out.merge.state) || !merge)) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_seconds));
  }
  // What scontrol no longer knew: from sacct, where the cluster keeps accounts.
  bool unknown = out.merge.state == "UNKNOWN";
  for (const auto& t : out.tasks) unknown = unknown || t.state == "UNKNOWN";
  if (unknown) {
    auto acct = sacct_view(ids.array_id + "," + ids.merge_id, run);
    for (size_t i = 0; i < out.tasks.size(); ++i)
      if (auto it = acct.find(ids.array_id + "_" + std::to_string(i)); out.tasks[i].state == "UNKNOWN" && it != acct.end())
        out.tasks[i] = it->second;
    if (auto it = acct.find(ids.merge_id); out.merge.state == "UNKNOWN" && it != acct.end()) out.merge = it->second;
  }
  return out;
}

}  // namespace sb
