// Every export format, read back the way a training job reads it: the torch
// form run by /usr/bin/python3 and its kwargs passed to a real
// torch.utils.data.DataLoader; json parsed; yaml parsed with yaml-cpp; env
// sourced by /bin/sh.
#include "results/export.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "results/store.h"
#include "results_test_util.h"

namespace feedtune::results {
namespace {

using nlohmann::json;
using testing::RunShell;
using testing::TempDir;
using testing::WriteFile;

const std::set<std::string> kExportedKeys = {"batch_size",   "num_workers",     "pin_memory",
                                           "non_blocking", "prefetch_factor", "persistent_workers",
                                           "cpu_binding",  "worker_threads"};

// The best of WriteSweep: 4 workers, pinned, non_blocking, prefetch 2, not persistent.
RunView SweepView(Store* store) {
  const RunRecord run =
      testing::WriteSweep(*store, testing::Machine("host-a", "lab-a", 4), "quickstart", 1.0);
  return LoadRunView(*store, run.id);
}

// A run whose best has no workers: what torch accepts then is narrower.
RunView NoWorkersView() {
  RunView view;
  view.run.id = 2;
  view.run.status = results::RunStatus::kDone;
  view.run.workload_name = "in-memory";
  view.run.backend = "cuda";
  TrialRecord best = testing::Trial("baseline", {.batch_size = 128,
                                                 .num_workers = 0,
                                                 .pin_memory = true,
                                                 .non_blocking = true,
                                                 .prefetch_factor = 4,
                                                 .persistent_workers = true},
                                    9000, 0.1);
  best.id = 7;
  view.trials.push_back(best);
  view.run.best_trial_id = 7;
  return view;
}

// Python that loads an exported module from `path` and uses it as a job would.
std::string DataLoaderScript(const std::string& path) {
  return R"py(
import importlib.util, json, sys, warnings
import torch
spec = importlib.util.spec_from_file_location("feedtune_settings", ")py" +
         path + R"py(")
module = importlib.util.module_from_spec(spec)
with warnings.catch_warnings():
    warnings.simplefilter("error")  # no version warning on this torch
    spec.loader.exec_module(module)
kwargs = module.DATALOADER_KWARGS
assert isinstance(kwargs, dict), type(kwargs)
dataset = torch.utils.data.TensorDataset(torch.arange(512, dtype=torch.float32).reshape(256, 2))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # pin_memory without an accelerator only warns
    loader = torch.utils.data.DataLoader(dataset, **kwargs)
    batches = 0
    for (x,) in loader:
        x = x.to("cpu", non_blocking=module.NON_BLOCKING)
        batches += 1
print(json.dumps({"kwargs": kwargs, "non_blocking": module.NON_BLOCKING, "batches": batches,
                  "loader_workers": loader.num_workers, "loader_pin": loader.pin_memory,
                  "loader_prefetch": loader.prefetch_factor,
                  "loader_persistent": loader.persistent_workers}))
)py";
}

TEST(ExportTest, FormatNames) {
  EXPECT_EQ(ParseExportFormat("torch"), ExportFormat::kTorch);
  EXPECT_EQ(ParseExportFormat("json"), ExportFormat::kJson);
  EXPECT_EQ(ParseExportFormat("yaml"), ExportFormat::kYaml);
  EXPECT_EQ(ParseExportFormat("env"), ExportFormat::kEnv);
  EXPECT_FALSE(ParseExportFormat("toml").has_value());
}

TEST(ExportTest, JsonIsTheBestConfig) {
  TempDir dir;
  Store store = Store::Open(dir / "feedtune.db");
  const json out = json::parse(RenderExport(SweepView(&store), ExportFormat::kJson));
  EXPECT_EQ(out, (json{{"batch_size", 32},
                       {"num_workers", 4},
                       {"pin_memory", true},
                       {"non_blocking", true},
                       {"prefetch_factor", 2},
                       {"persistent_workers", false},
                       {"cpu_binding", "none"},
                       {"worker_threads", 0}}));
  // The same object the report calls best.config.
  EXPECT_EQ(out, json::parse(RenderJson(SweepView(&store)))["best"]["config"]);
}

TEST(ExportTest, YamlHasTheSameKeysAndNotesTorchVersions) {
  TempDir dir;
  Store store = Store::Open(dir / "feedtune.db");
  const std::string text = RenderExport(SweepView(&store), ExportFormat::kYaml);
  const YAML::Node node = YAML::Load(text);
  ASSERT_TRUE(node.IsMap());
  std::set<std::string> keys;
  for (const auto& item : node) keys.insert(item.first.as<std::string>());
  EXPECT_EQ(keys, kExportedKeys);
  EXPECT_EQ(node["batch_size"].as<int>(), 32);
  EXPECT_EQ(node["num_workers"].as<int>(), 4);
  EXPECT_TRUE(node["pin_memory"].as<bool>());
  EXPECT_TRUE(node["non_blocking"].as<bool>());
  EXPECT_EQ(node["prefetch_factor"].as<int>(), 2);
  EXPECT_FALSE(node["persistent_workers"].as<bool>());
  EXPECT_NE(text.find("prefetch_factor needs torch >= 1.7"), std::string::npos) << text;
  EXPECT_NE(text.find("lab-a"), std::string::npos) << "provenance comment";
}

TEST(ExportTest, EnvLinesSourceInAShell) {
  TempDir dir;
  Store store = Store::Open(dir / "feedtune.db");
  const std::string path = dir / "feedtune.env";
  WriteFile(path, RenderExport(SweepView(&store), ExportFormat::kEnv));
  const auto result = RunShell(
      "env -i /bin/sh -c 'set -a; . " + path + "; env' | grep '^FEEDTUNE_' | LC_ALL=C sort", dir);
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_EQ(result.out,
            "FEEDTUNE_BATCH_SIZE=32\n"
            "FEEDTUNE_NON_BLOCKING=1\n"
            "FEEDTUNE_NUM_WORKERS=4\n"
            "FEEDTUNE_PERSISTENT_WORKERS=0\n"
            "FEEDTUNE_PIN_MEMORY=1\n"
            "FEEDTUNE_PREFETCH_FACTOR=2\n");
}

TEST(ExportTest, WithoutWorkersPrefetchIsLeftToTorchAndPersistenceIsOff) {
  const RunView view = NoWorkersView();
  const json out = json::parse(RenderExport(view, ExportFormat::kJson));
  EXPECT_TRUE(out["prefetch_factor"].is_null());
  EXPECT_FALSE(out["persistent_workers"].get<bool>());
  EXPECT_NE(RenderExport(view, ExportFormat::kEnv).find("FEEDTUNE_PREFETCH_FACTOR=\n"),
            std::string::npos);
  const YAML::Node yaml = YAML::Load(RenderExport(view, ExportFormat::kYaml));
  EXPECT_TRUE(yaml["prefetch_factor"].IsNull());
  const std::string torch = RenderExport(view, ExportFormat::kTorch);
  EXPECT_EQ(torch.find("    \"prefetch_factor\":"), std::string::npos) << torch;
  EXPECT_NE(torch.find("# prefetch_factor: left to torch"), std::string::npos) << torch;
  EXPECT_NE(torch.find("\"persistent_workers\": False,  # torch >= 1.7; False because torch "
                       "requires workers"),
            std::string::npos)
      << torch;
}

// A node run's best (2 ranks, 2 threads per worker, bound): the torch format
// ends with the launch and each rank's binding; env carries the same.
RunView NodeView(loader::CpuBinding binding) {
  RunView view = NoWorkersView();
  TrialRecord& best = view.trials[0];
  best.knobs.num_workers = 2;
  best.knobs.worker_threads = 2;
  best.knobs.cpu_binding = binding;
  NodeFigures node;
  node.ranks = 2;
  for (int r = 0; r < 2; ++r) {
    RankRecord row;
    row.rank = r;
    row.cpu_mask = r == 0 ? "0-3" : "4-7";
    node.rank_rows.push_back(row);
  }
  best.node = node;
  return view;
}

TEST(ExportTest, NodeRunGivesTheLaunchAndEachRanksBinding) {
  const std::string split = RenderExport(NodeView(loader::CpuBinding::kSplit), ExportFormat::kTorch);
  EXPECT_NE(split.find("# Measured as a node of 2 ranks"), std::string::npos) << split;
  EXPECT_NE(split.find("#   OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 torchrun --nproc_per_node 2 "), std::string::npos)
      << split;
  EXPECT_NE(split.find("OMP_NUM_THREADS = 2\n"), std::string::npos) << split;
  EXPECT_NE(split.find("#   rank 0: taskset -c 0-3 "), std::string::npos) << split;
  EXPECT_NE(split.find("#   rank 1: taskset -c 4-7 "), std::string::npos) << split;
  // numa: the same CPUs, with memory kept on their node.
  const std::string numa = RenderExport(NodeView(loader::CpuBinding::kNuma), ExportFormat::kTorch);
  EXPECT_NE(numa.find("#   rank 1: numactl --physcpubind=4-7 --localalloc "), std::string::npos) << numa;
  EXPECT_EQ(numa.find("taskset"), std::string::npos) << numa;
  // Unbound: the launch, no per-rank lines.
  const std::string none = RenderExport(NodeView(loader::CpuBinding::kNone), ExportFormat::kTorch);
  EXPECT_NE(none.find("torchrun --nproc_per_node 2"), std::string::npos) << none;
  EXPECT_EQ(none.find("rank 0:"), std::string::npos) << none;

  const std::string env = RenderExport(NodeView(loader::CpuBinding::kSplit), ExportFormat::kEnv);
  for (const char* line : {"OMP_NUM_THREADS=2\n", "MKL_NUM_THREADS=2\n", "FEEDTUNE_NPROC_PER_NODE=2\n",
                           "FEEDTUNE_CPU_BINDING=split\n", "FEEDTUNE_RANK0_CPUS=0-3\n", "FEEDTUNE_RANK1_CPUS=4-7\n"}) {
    EXPECT_NE(env.find(line), std::string::npos) << line << env;
  }
}

TEST(ExportTest, RunWithoutBestIsAClearError) {
  RunView view;
  view.run.id = 5;
  view.run.status = results::RunStatus::kRunning;
  try {
    RenderExport(view, ExportFormat::kTorch);
    FAIL() << "expected ExportError";
  } catch (const ExportError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run 5 (running) has no best setting to export; let a sweep finish, or pick a "
              "finished run with --run N (see `feedtune report`)");
  }
}

class TorchExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::PythonHasTorch(dir_)) {
      GTEST_SKIP() << "/usr/bin/python3 cannot import torch (install python3-torch: "
                      "scripts/setup-deps --torch)";
    }
  }
  json RunWithDataLoader(const std::string& module_text) {
    const std::string module = dir_ / "feedtune_settings.py";
    const std::string script = dir_ / "job.py";
    WriteFile(module, module_text);
    WriteFile(script, DataLoaderScript(module));
    const auto result = RunShell("/usr/bin/python3 " + script, dir_);
    EXPECT_EQ(result.code, 0) << result.err << "\n" << module_text;
    if (result.code != 0) return json::object();
    // The script's last line is its JSON summary.
    std::string out = result.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return json::parse(out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1));
  }
  TempDir dir_;
};

TEST_F(TorchExportTest, KwargsGoStraightIntoADataLoader) {
  Store store = Store::Open(dir_ / "feedtune.db");
  const json out = RunWithDataLoader(RenderExport(SweepView(&store), ExportFormat::kTorch));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out["kwargs"], (json{{"batch_size", 32},
                                 {"num_workers", 4},
                                 {"pin_memory", true},
                                 {"prefetch_factor", 2},
                                 {"persistent_workers", false}}));
  EXPECT_EQ(out["non_blocking"], true);
  EXPECT_EQ(out["batches"], 8);  // 256 samples in batches of 32
  EXPECT_EQ(out["loader_workers"], 4);
  EXPECT_EQ(out["loader_prefetch"], 2);
}

TEST_F(TorchExportTest, NoWorkersFormIsAcceptedByTorch) {
  const json out = RunWithDataLoader(RenderExport(NoWorkersView(), ExportFormat::kTorch));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out["loader_workers"], 0);
  EXPECT_EQ(out["loader_persistent"], false);
  EXPECT_EQ(out["batches"], 2);
}

TEST_F(TorchExportTest, AnOldTorchIsWarnedNotSilentlyStripped) {
  // The module run against a stand-in torch 1.6: it keeps the settings and
  // warns, naming each one and the version it needs.
  TempDir fake;
  std::filesystem::create_directories(fake.path() / "torch");
  WriteFile(fake / "torch/__init__.py", "__version__ = '1.6.0+cu101'\n");
  Store store = Store::Open(dir_ / "feedtune.db");
  WriteFile(dir_ / "feedtune_settings.py", RenderExport(SweepView(&store), ExportFormat::kTorch));
  WriteFile(dir_ / "old.py",
            "import sys, warnings\n"
            "sys.path.insert(0, '" + fake.path().string() + "')\n"
            "sys.path.insert(0, '" + dir_.path().string() + "')\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    import feedtune_settings\n"
            "for w in caught:\n"
            "    print(w.message)\n"
            "print(sorted(feedtune_settings.DATALOADER_KWARGS))\n");
  const auto result = RunShell("/usr/bin/python3 " + (dir_ / "old.py"), dir_);
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_NE(result.out.find("feedtune: DataLoader argument prefetch_factor needs torch >= 1.7, this "
                            "is torch 1.6.0+cu101"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("argument persistent_workers needs torch >= 1.7"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("'persistent_workers', 'pin_memory', 'prefetch_factor'"),
            std::string::npos)
      << result.out;
}

TEST(ExportHeader, AGpuIdleNobodyMeasuredSaysSo) {
  // A command that reported no gpu_idle_frac: its best says "not measured", not "-nan%".
  RunView view = NoWorkersView();
  view.trials[0].gpu_idle_frac = std::nan("");
  const std::string text = RenderExport(view, ExportFormat::kEnv);
  EXPECT_NE(text.find("GPU idle not measured"), std::string::npos) << text;
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
}

}  // namespace
}  // namespace feedtune::results
