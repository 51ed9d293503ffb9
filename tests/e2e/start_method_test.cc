// End to end: the workers' start method for a Python command workload (issue
// 22: the pickling trap before any trial, each method measured), and
// `feedtune init --script` writing a config that `validate` accepts.
//
// The start-method tests need /usr/bin/python3 with torch (scripts/setup-deps
// installs python3-torch), as tests/workloads/probe_test.cc does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "results/store.h"
#include "tests/common/run_feedtune.h"

namespace {

namespace fs = std::filesystem;

using Result = feedtune::testing_util::CliResult;

std::string Python() { return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

class StartMethodCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-e2e-mp-" + std::to_string(getpid()) + "-" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result Run(const std::string& args) { return feedtune::testing_util::RunFeedtune(args, dir_, dir_.string()); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  void RequireTorch() {
    const std::string check = Python() + " -c 'import torch.utils.data' 2>/dev/null";
    if (std::system(check.c_str()) != 0) GTEST_SKIP() << "python3 cannot import torch (scripts/setup-deps)";
  }

  // Two small datasets: one holding a lambda (it does not pickle), one plain.
  void WriteDatasets() {
    Write("mpdata.py", R"(import time

import torch


class LambdaDataset(torch.utils.data.Dataset):
    def __init__(self, n=64):
        self.n = n
        self.transform = lambda x: x * 2

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.transform(torch.zeros(256))


class PlainDataset(torch.utils.data.Dataset):
    def __init__(self, n=512):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.002)  # waiting per sample (storage), so workers pay off and the phase runs
        return torch.full((256,), float(i))
)");
  }

  std::string Config(const std::string& dataset, const std::string& start_methods) {
    return "name: mp\n"
           "workload:\n"
           "  kind: command\n"
           "  protocol: serve\n"
           "  argv: [" + Python() + ", " FEEDTUNE_SOURCE_DIR "/workloads/python/feedtune_probe.py, --serve, "
           "--device, cpu, --dataset, \"mpdata:" + dataset + "\", --pythonpath, \"" + dir_.string() + "\"]\n"
           "  timeout_s: 120\n"
           "loader:\n"
           "  batch_size: 16\n"
           "device:\n"
           "  step_us: 2000\n"
           "sweep:\n"
           "  max_workers: 2\n"
           "  prefetch_factors: [2]\n"
           "  repeats: 1\n"
           "  warmup_batches: 2\n"
           "  measure_seconds: 0.25\n"
           "  diagnose: false\n"
           "  start_methods: " + start_methods + "\n";
  }

  fs::path dir_;
};

// A Dataset holding a lambda cannot reach a forkserver or spawn worker: the
// sweep names the attribute and the fix, and stops before the first trial.
TEST_F(StartMethodCli, ADatasetHoldingALambdaIsRefusedBeforeTheFirstTrial) {
  RequireTorch();
  WriteDatasets();
  Write("lambda.yaml", Config("LambdaDataset", "[fork, spawn]"));
  const Result r = Run("sweep lambda.yaml --db lambda.db -q");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("Dataset attribute 'transform' holds a lambda"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("module-level function"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No trial was run"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "lambda.db")) << "the refusal leaves no results file";

  // fork alone pickles nothing: the same Dataset is no problem there.
  Write("fork.yaml", Config("LambdaDataset", "[fork]") + "");
  const Result validate = Run("validate fork.yaml");
  EXPECT_EQ(validate.code, 0) << validate.err;
}

// A picklable Dataset is measured under each method; the report shows the
// worker start-up per method, and the run records the interpreter.
TEST_F(StartMethodCli, APicklableDatasetIsMeasuredUnderEachMethod) {
  RequireTorch();
  WriteDatasets();
  Write("plain.yaml", Config("PlainDataset", "[fork, forkserver, spawn]"));
  const Result r = Run("sweep plain.yaml --db plain.db -q");
  ASSERT_EQ(r.code, 0) << r.err << r.out;

  const Result as_json = Run("report --db plain.db --format json");
  ASSERT_EQ(as_json.code, 0) << as_json.err;
  const nlohmann::json report = nlohmann::json::parse(as_json.out);
  std::map<std::string, double> startup;
  for (const auto& t : report["trials"]) {
    if (t["phase"] != "multiprocessing_context") continue;
    const std::string method = t["config"].value("multiprocessing_context", std::string("default"));
    EXPECT_EQ(t["status"], "ok") << t.dump();
    ASSERT_TRUE(t["worker_startup_s"].is_number()) << t.dump();
    startup[method] = t["worker_startup_s"].get<double>();
  }
  EXPECT_EQ(startup.size(), 3u) << as_json.out;  // the default (fork here) again, forkserver, spawn
  EXPECT_EQ(startup.count("forkserver"), 1u);
  EXPECT_EQ(startup.count("spawn"), 1u);

  const Result text = Run("report --db plain.db");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("spawn: worker start-up"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("forkserver: worker start-up"), std::string::npos) << text.out;

  const feedtune::results::Store store = feedtune::results::Store::OpenReadOnly((dir_ / "plain.db").string());
  const auto runs = store.LoadRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].python.python_version.empty());
  EXPECT_FALSE(runs[0].python.torch_version.empty());
  EXPECT_FALSE(runs[0].python.default_start_method.empty());
}

// A tune.py serving with feedtune.serve gets the stage verdict, and its step
// stage is the user's own step (a 6 ms sleep per batch of 16 here), not the
// probe's modelled one.
TEST_F(StartMethodCli, ATunePyIsDiagnosedWithItsOwnStep) {
  RequireTorch();
  WriteDatasets();
  Write("tune.py", "import sys, time\n"
                   "sys.path.insert(0, \"" FEEDTUNE_SOURCE_DIR "/python\")\n"
                   "sys.path.insert(0, \"" + dir_.string() + "\")\n"
                   "from feedtune import serve\n"
                   "from mpdata import PlainDataset\n"
                   "def train_step(batch):\n"
                   "    time.sleep(0.006)\n"
                   "serve(dataset=PlainDataset, step=train_step, batch_size=16)\n");
  Write("tune.yaml", "name: tune\nworkload:\n  kind: command\n  protocol: serve\n  argv: [" + Python() + ", " +
                         (dir_ / "tune.py").string() + "]\n  timeout_s: 120\nloader:\n  batch_size: 16\n"
                         "  num_workers: 1\nsweep:\n  repeats: 1\n  warmup_batches: 2\n  measure_seconds: 0.25\n");
  const Result r = Run("diagnose tune.yaml --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json verdict = nlohmann::json::parse(r.out);
  bool step_seen = false;
  for (const auto& stage : verdict["stages"]) {
    if (stage["stage"] != "fetch") {
      EXPECT_TRUE(stage["measured"].get<bool>()) << stage.dump();
    }
    if (stage["stage"] == "step") {
      step_seen = true;
      // 16 samples per 6 ms step: 2667/s at most; a loaded box only slows it.
      EXPECT_LT(stage["samples_per_s"].get<double>(), 16 / 0.006 * 1.05) << stage.dump();
      EXPECT_GT(stage["samples_per_s"].get<double>(), 16 / 0.006 / 4) << stage.dump();
    }
  }
  EXPECT_TRUE(step_seen) << r.out;
}

// `feedtune init --script tune.py` writes a commented serve config that
// validate accepts; the script's batch_size is carried over.
TEST_F(StartMethodCli, InitWritesAConfigThatValidates) {
  Write("tune.py", "from feedtune import serve\n"
                   "serve(dataset=make_dataset, step=train_step, batch_size=32)\n");
  const Result init = Run("init --script tune.py --out tune.yaml");
  ASSERT_EQ(init.code, 0) << init.err;
  const Result validate = Run("validate tune.yaml");
  ASSERT_EQ(validate.code, 0) << validate.err;
  EXPECT_NE(validate.out.find("kind: command"), std::string::npos) << validate.out;
  EXPECT_NE(validate.out.find("protocol: serve"), std::string::npos) << validate.out;
  EXPECT_NE(validate.out.find("tune.py"), std::string::npos) << validate.out;
  EXPECT_NE(validate.out.find("batch_size: 32"), std::string::npos) << validate.out;
  std::ifstream in(dir_ / "tune.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("# "), std::string::npos) << "commented";

  // An existing --out is left alone; a missing script is a usage error with the fix.
  EXPECT_EQ(Run("init --script tune.py --out tune.yaml").code, 2);
  const Result missing = Run("init --script nope.py");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("feedtune.serve"), std::string::npos) << missing.err;
  // Without --out: stdout; --help teaches the five lines.
  const Result printed = Run("init --script tune.py");
  EXPECT_EQ(printed.code, 0);
  EXPECT_NE(printed.out.find("protocol: serve"), std::string::npos);
  const Result help = Run("init --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE((help.out + help.err).find("from feedtune import serve"), std::string::npos);
}

// init writes an interpreter that imports torch: on a PATH whose first
// python3 lacks it (a pyenv python3 ahead of Debian's /usr/bin/python3, which
// has it), the config runs /usr/bin/python3, and init says so; a --python
// that cannot import torch is refused with the reason.
TEST_F(StartMethodCli, InitPicksAnInterpreterThatImportsTorch) {
  Write("tune.py", "from feedtune import serve\nserve(dataset=None, step=None, batch_size=16)\n");
  // A python3 without torch: Debian's, with its site-packages turned off (-S).
  const fs::path shim = dir_ / "shim";
  fs::create_directories(shim);
  const std::string bare = Write("shim/python3", "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n");
  fs::permissions(bare, fs::perms::owner_all);
  const auto init = [&](const std::string& args) {
    const std::string cmd = "cd " + dir_.string() + " && PATH=" + shim.string() + ":/usr/bin:/bin " +
                            FEEDTUNE_BINARY + " init --script tune.py " + args + " >out 2>err";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream out(dir_ / "out"), err(dir_ / "err");
    r.out.assign(std::istreambuf_iterator<char>(out), std::istreambuf_iterator<char>());
    r.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
    return r;
  };
  const Result chosen = init("");
  ASSERT_EQ(chosen.code, 0) << chosen.err;
  EXPECT_NE(chosen.out.find("argv: [\"/usr/bin/python3\", \"tune.py\"]"), std::string::npos) << chosen.out;
  EXPECT_NE(chosen.err.find("feedtune init: the config runs /usr/bin/python3 (torch "), std::string::npos) << chosen.err;
  EXPECT_NE(chosen.err.find("passed over python3: ModuleNotFoundError: No module named 'torch'"), std::string::npos)
      << chosen.err;

  const Result refused = init("--python " + bare);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("feedtune init: --python " + bare + ": ModuleNotFoundError: No module named 'torch'"),
            std::string::npos)
      << refused.err;
  EXPECT_TRUE(refused.out.empty()) << "nothing written: " << refused.out;
  const Result missing = init("--python /nonexistent/python3");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/python3: cannot run it"), std::string::npos) << missing.err;
}

}  // namespace
