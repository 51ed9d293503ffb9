// `feedtune fleet`: usage errors, the Slurm script's contents, and its job
// scripts run by hand (no Slurm needed: an array task is a bash script reading
// SLURM_ARRAY_TASK_ID), so the merge's bookkeeping is tested in every build.
// The real cluster is tests/fleet/slurm_fleet_test.sh (label `fleet`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/read_file.h"
#include "tests/common/run_feedtune.h"
#include "results/store.h"
#include "tuner/search/seed.h"

namespace {

namespace fs = std::filesystem;

using Result = feedtune::testing_util::CliResult;
using feedtune::testing_util::ReadFile;

class FleetCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedtune-fleet-" + std::to_string(getpid()) + "-" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result Run(const std::string& args) { return feedtune::testing_util::RunFeedtune(args, dir_); }

  std::string Config() const { return std::string(FEEDTUNE_SOURCE_DIR) + "/tests/fleet/tiny.yaml"; }

  // The text between `<<'MARKER'` and the MARKER line of the printed script.
  static std::string HereDoc(const std::string& script, const std::string& marker) {
    const size_t start = script.find("<<'" + marker + "'\n");
    const size_t body = script.find('\n', start) + 1;
    const size_t end = script.find("\n" + marker + "\n", body);
    if (start == std::string::npos || end == std::string::npos) return "";
    return script.substr(body, end - body + 1);
  }

  int Bash(const std::string& script_path, const std::string& env) {
    const std::string cmd = env + " bash " + script_path + " >>" + (dir_ / "bash.log").string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }

  fs::path dir_;
};

TEST_F(FleetCli, NeedsASchedulerAndItsOptions) {
  Result r = Run("fleet");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("slurm or k8s"), std::string::npos) << r.err;
  r = Run("fleet pbs");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("got 'pbs'"), std::string::npos) << r.err;
  r = Run("fleet slurm --config " + Config() + " --nodes 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--results"), std::string::npos) << r.err;
  r = Run("fleet slurm --config " + Config() + " --nodes 0 --results " + dir_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--nodes must be at least 1"), std::string::npos) << r.err;
  EXPECT_EQ(Run("fleet --help").code, 0);
  EXPECT_EQ(Run("fleet slurm --help").code, 0);
}

TEST_F(FleetCli, SlurmRefusesABadConfigAndUnquotablePaths) {
  std::ofstream(dir_ / "bad.yaml") << "name: x\nworkload:\n  samplez: 3\n";
  Result r = Run("fleet slurm --config " + (dir_ / "bad.yaml").string() + " --nodes 2 --results " + dir_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("samplez"), std::string::npos) << r.err;
  r = Run("fleet slurm --config " + Config() + " --nodes 2 --results '" + (dir_ / "a b").string() + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("#SBATCH line"), std::string::npos) << r.err;
}

TEST_F(FleetCli, SlurmScriptAsksForWhatWasGiven) {
  const Result r = Run("fleet slurm --config " + Config() + " --nodes 16 --results " + dir_.string() +
                       "/out --partition gpu --time 01:00:00 --gpus-per-node 8 --feedtune /opt/ft/bin/feedtune");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string array = HereDoc(r.out, "FEEDTUNE_ARRAY_JOB");
  const std::string merge = HereDoc(r.out, "FEEDTUNE_MERGE_JOB");
  ASSERT_FALSE(array.empty()) << r.out;
  ASSERT_FALSE(merge.empty()) << r.out;
  for (const std::string& line : std::vector<std::string>{"#SBATCH --array=0-15\n", "#SBATCH --exclusive\n", "#SBATCH --partition=gpu\n",
                                 "#SBATCH --time=01:00:00\n", "#SBATCH --gpus-per-node=8\n",
                                 "config='" + Config() + "'\n", "'/opt/ft/bin/feedtune' sweep --config"}) {
    EXPECT_NE(array.find(line), std::string::npos) << line << " missing in\n" << array;
  }
  EXPECT_NE(array.find("#SBATCH --output=" + dir_.string() + "/out/logs/task-%a.out"), std::string::npos);
  EXPECT_NE(merge.find("#SBATCH --partition=gpu\n"), std::string::npos);
  EXPECT_EQ(merge.find("--gpus-per-node"), std::string::npos) << "the merge needs no GPU";
  EXPECT_NE(merge.find("nodes=16\n"), std::string::npos);
  EXPECT_NE(r.out.find("--dependency=afterany:\"$array_job\""), std::string::npos);
  // Without --feedtune the nodes run this very binary.
  const Result self = Run("fleet slurm --config " + Config() + " --nodes 1 --results " + dir_.string());
  EXPECT_NE(self.out.find("'" + fs::canonical(FEEDTUNE_BINARY).string() + "' sweep"), std::string::npos);
}

// The array's task 0 runs, task 1 never does (as when it is killed before its
// end): the merge gathers task 0's run and names task 1 as missing.
TEST_F(FleetCli, SlurmJobScriptsRunByHandMergeWhatThereIs) {
  const fs::path results = dir_ / "fleet";
  const Result r = Run("fleet slurm --config " + Config() + " --nodes 2 --results " + results.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ofstream(dir_ / "array.sh") << HereDoc(r.out, "FEEDTUNE_ARRAY_JOB");
  std::ofstream(dir_ / "merge.sh") << HereDoc(r.out, "FEEDTUNE_MERGE_JOB");
  fs::create_directories(results / "status");
  ASSERT_EQ(Bash((dir_ / "array.sh").string(), "SLURM_ARRAY_TASK_ID=0"), 0) << ReadFile(dir_ / "bash.log");
  ASSERT_EQ(Bash((dir_ / "merge.sh").string(), ""), 0) << ReadFile(dir_ / "bash.log");

  const std::string summary = ReadFile(results / "fleet-summary.txt");
  EXPECT_NE(summary.find("feedtune fleet: 2 tasks, 1 succeeded, 1 missing; 1 results file(s) merged"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("task 1: missing: no exit status (killed, or never ran)"), std::string::npos) << summary;
  const Result compare = Run("compare --db " + (results / "fleet.db").string() + " --format json");
  ASSERT_EQ(compare.code, 0) << compare.err;
  EXPECT_NE(compare.out.find("fleet-tiny"), std::string::npos) << compare.out;
  EXPECT_NE(ReadFile(results / "fleet.html").find("fleet-tiny"), std::string::npos);

  // A second merge of the same files adds nothing (merge matches runs by uid).
  ASSERT_EQ(Bash((dir_ / "merge.sh").string(), ""), 0) << ReadFile(dir_ / "bash.log");
  EXPECT_EQ(ReadFile(results / "fleet-summary.txt"), summary);
}

TEST_F(FleetCli, MergeWithNothingToMergeFails) {
  const fs::path results = dir_ / "fleet";
  const Result r = Run("fleet slurm --config " + Config() + " --nodes 1 --results " + results.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ofstream(dir_ / "merge.sh") << HereDoc(r.out, "FEEDTUNE_MERGE_JOB");
  fs::create_directories(results / "status");
  EXPECT_EQ(Bash((dir_ / "merge.sh").string(), ""), 1);
  EXPECT_NE(ReadFile(dir_ / "bash.log").find("no task left a results file"), std::string::npos);
  EXPECT_FALSE(fs::exists(results / "fleet.html"));
}

// `sweep --seed-from`: a short sweep stored as host box-a, then a sweep of
// the same workload as box-b (same class: this machine) seeded from it.
TEST_F(FleetCli, SweepSeededFromAFleetFileNamesItsNeighbourAndStoresIt) {
  // Seconds, not tens of them: short windows, one repeat, no stage trials.
  std::ofstream(dir_ / "seed.yaml") << "name: seed-tiny\n"
                                       "workload: {kind: synthetic, samples: 128, sample_bytes: 1024, "
                                       "cpu_us_per_sample: 0, io_us_per_sample: 200, jitter: 0}\n"
                                       "loader: {batch_size: 16}\n"
                                       "device: {backend: host-sim, step_us: 1000}\n"
                                       "sweep: {max_workers: 2, prefetch_factors: [2], repeats: 1, "
                                       "warmup_batches: 1, measure_seconds: 0.05, diagnose: false}\n";
  const std::string config = (dir_ / "seed.yaml").string();
  const std::string fleet = (dir_ / "fleet.db").string();
  Result r = Run("sweep " + config + " --db " + fleet + " --label box-a -q");
  ASSERT_EQ(r.code, 0) << r.err;

  r = Run("sweep " + config + " --db " + (dir_ / "b.db").string() + " --label box-b --seed-from " + fleet);
  ASSERT_EQ(r.code, 0) << r.err;
  // Named before the first trial, with how it was chosen.
  const size_t named = r.err.find("seeded from " + fleet + " (class match): the latest run of its class ");
  ASSERT_NE(named, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(run 1 of box-a, ", named), std::string::npos) << r.err;
  EXPECT_LT(named, r.err.find("[ 1] baseline")) << r.err;
  // The seeded curve starts at box-a's knee, or at its best setting's worker
  // count where that is higher (more workers paid once persistent); which one
  // box-a's short sweep found depends on its timing, so read it back.
  {
    const auto a_store = feedtune::results::Store::OpenReadOnly(fleet);
    const auto a = a_store.LoadRun(1);
    ASSERT_TRUE(a.has_value() && a->knee_workers && a->best_trial_id);
    int best_workers = 0;
    for (const auto& t : a_store.LoadTrials(1)) {
      if (t.id == *a->best_trial_id) best_workers = t.knobs.num_workers;
    }
    const bool from_best = best_workers > *a->knee_workers;
    const int start = std::clamp(from_best ? best_workers : *a->knee_workers, 1, 2);  // 1 to max_workers
    const std::string expected = "seeded at " + std::to_string(start) + (start == 1 ? " worker, " : " workers, ") +
                                 (from_best ? "the best setting's worker count of " : "the knee of ") + "run 1 of box-a";
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  }

  // Stored with the run; --resume would re-seed from it.
  const auto store = feedtune::results::Store::OpenReadOnly((dir_ / "b.db").string());
  const auto run = store.LoadRun(1);
  ASSERT_TRUE(run.has_value());
  ASSERT_TRUE(run->facts.seed.has_value()) << run->calibration_json;
  const auto seed = std::optional(feedtune::tuner::SeedFromFacts(*run->facts.seed));
  EXPECT_EQ(seed->db_path, fleet);
  EXPECT_EQ(seed->run_id, 1);
  EXPECT_EQ(seed->run_host, "box-a");
  EXPECT_EQ(seed->match, "class");
  EXPECT_EQ(seed->search.source, "run 1 of box-a");

  // Another workload: nothing matches, said, and the sweep runs unseeded.
  std::ofstream(dir_ / "other.yaml") << ReadFile(dir_ / "seed.yaml").replace(0, 15, "name: other-one");
  r = Run("sweep " + (dir_ / "other.yaml").string() + " --db " + (dir_ / "c.db").string() + " --seed-from " + fleet);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("--seed-from " + fleet + ": no run of workload 'other-one' with a best setting (the file holds: "
                       "seed-tiny (1 run on 1 host)); sweeping unseeded"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("seeded at"), std::string::npos) << r.out;
}

TEST_F(FleetCli, SweepSeedFromAMissingOrForeignFileExits2NamingIt) {
  std::ofstream(dir_ / "notes.txt") << "not a database\n";
  const std::string db = (dir_ / "new.db").string();
  for (const std::string name : {"missing.db", "notes.txt"}) {
    const std::string path = (dir_ / name).string();
    const Result r = Run("sweep " + Config() + " --db " + db + " --seed-from " + path);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--seed-from " + path), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(db)) << "a refused sweep leaves no results file";
  }
  const Result help = Run("sweep --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--seed-from FILE starts from the stored run of the nearest machine"), std::string::npos);
  const Result both = Run("sweep --resume 1 --db " + db + " --seed-from " + (dir_ / "notes.txt").string());
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--resume re-seeds from the seed stored with the run"), std::string::npos) << both.err;
}

}  // namespace
