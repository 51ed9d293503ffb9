// The workloads from the command line: `feedtune gen-data`, exit codes for
// missing data, a corrupt record through `feedtune trial`, and a short variant
// of every config in configs/ swept end to end.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/run_feedtune.h"
#include "tuner/config/config.h"
#include "workloads/files_dataset.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune {
namespace {

namespace fs = std::filesystem;

using Result = testing_util::CliResult;
using testing_util::ReadFile;

class WorkloadCli : public testing::Test {
 protected:
  void SetUp() override {
    std::string test = testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(test.begin(), test.end(), '/', '-');  // a parameterized test's name: "Shipped/quickstart"
    dir_ = fs::temp_directory_path() / ("feedtune-wcli-" + std::to_string(getpid()) + "-" + test);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs feedtune from the source tree (configs name paths relative to it).
  Result Run(const std::string& args) { return testing_util::RunFeedtune(args, dir_, FEEDTUNE_SOURCE_DIR); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  fs::path dir_;
};

void ExpectDatasetContent(const std::string& path, workloads::FilesLayout layout, int64_t samples, int64_t bytes,
                          uint64_t seed) {
  workloads::SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  const workloads::FilesDataset d({path, layout, workloads::FilesIo::kPread, workloads::CacheMode::kWarm}, cost,
                                  workloads::CpuCalibration{});
  ASSERT_EQ(d.size(), samples);
  std::vector<std::byte> out(static_cast<size_t>(bytes)), expected(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < samples; ++i) {
    ASSERT_EQ(d.Read(i, out), bytes);
    workloads::SyntheticDataset::FillContent(seed, i, expected);
    ASSERT_EQ(out, expected) << i;
  }
}

TEST_F(WorkloadCli, GenDataWritesBothLayoutsWithProgress) {
  const std::string shards = (dir_ / "shards").string();
  Result r = Run("gen-data --out " + shards +
                 " --layout shards --samples 300 --sample-bytes 5000 --shard-bytes 200000 --seed 4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote 300 samples of 5000 bytes (1.5 MB, layout shards) to " + shards + "\n");
  EXPECT_NE(r.err.find("gen-data: 300/300 samples (100%)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gen-data: 150/300 samples ( 50%)"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(shards) / "index.ftidx"));
  EXPECT_TRUE(fs::exists(fs::path(shards) / "shard-00007.ftrec"));  // 300 x 5008 bytes in 200 kB shards
  ExpectDatasetContent(shards, workloads::FilesLayout::kShards, 300, 5000, 4);

  const std::string files = (dir_ / "files").string();
  r = Run("gen-data --out " + files + " --layout files --samples 1001 --sample-bytes 300 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(fs::exists(fs::path(files) / "00001" / "000001000.bin"));
  ExpectDatasetContent(files, workloads::FilesLayout::kFiles, 1001, 300, 0);
}

TEST_F(WorkloadCli, GenDataUsageErrorsExit2) {
  fs::create_directories(dir_ / "full");
  std::ofstream(dir_ / "full" / "x") << "x";
  const std::string out = " --out " + (dir_ / "new").string();
  struct Case {
    std::string args;
    std::string error;
  } cases[] = {
      {"--out " + (dir_ / "full").string() + " --samples 5 --sample-bytes 5",
       "feedtune gen-data: " + (dir_ / "full").string() +
           ": exists and is not an empty directory; choose another --out or remove it\n"},
      {out + " --layout zip --samples 5 --sample-bytes 5",
       "feedtune gen-data: --layout: expected shards | files | npy | hdf5 | lmdb | jpeg | tfrecord | tar, got 'zip'\n"},
      {out + " --samples 0 --sample-bytes 5",
       "feedtune gen-data: --samples: expected an integer in [1, 100000000], got 0\n"},
      {out + " --samples 5 --sample-bytes 0",
       "feedtune gen-data: --sample-bytes: expected an integer in [1, 1073741824], got 0\n"},
  };
  for (const Case& c : cases) {
    const Result r = Run("gen-data " + c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    // The size estimate may come first (the output folder is checked when
    // the writer opens it); the error is the last line.
    EXPECT_TRUE(r.err.ends_with(c.error)) << r.err;
  }
  const Result r = Run("gen-data --samples 5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "new"));
}

TEST_F(WorkloadCli, MissingOrEmptyDatasetExits2) {
  const std::string data = (dir_ / "data").string();
  const std::string config = Write("f.yaml", "name: f\nworkload:\n  kind: files\n  path: " + data + "\n");
  Result r = Run("sweep " + config + " --db " + (dir_ / "r.db").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "feedtune: " + config + ":4:9: workload.path: expected a directory holding a dataset, got \"" +
                       data + "\" (No such file or directory; make one with `feedtune gen-data --out " + data +
                       " --layout shards ...`)\n");
  fs::create_directories(data);
  r = Run("trial " + config);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("(the directory is empty; make one with"), std::string::npos) << r.err;
  r = Run("validate " + config);
  EXPECT_EQ(r.code, 2);
}

TEST_F(WorkloadCli, CorruptRecordFailsTheTrialNamingFileRecordAndOffset) {
  const std::string data = (dir_ / "data").string();
  ASSERT_EQ(Run("gen-data -q --out " + data + " --samples 40 --sample-bytes 1000").code, 0);
  // Record 5 starts at 16 + 5 * 1008; flip a payload byte.
  const std::string shard = (fs::path(data) / "shard-00000.ftrec").string();
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16 + 5 * 1008 + 8 + 100);
    f.put('\x7f');
  }
  const std::string config =
      Write("f.yaml", "name: f\nworkload: {kind: files, path: " + data +
                          ", cpu_us_per_sample: 0}\nloader: {batch_size: 8, shuffle: false}\n"
                          "device: {backend: host-sim, step_us: 100}\nsweep: {repeats: 1, measure_seconds: 0.1}\n");
  const Result r = Run("trial " + config);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(shard + ": record 5 (record 5 of this shard) at byte offset 5056: corrupt: CRC32C of the "
                               "payload is 0x"),
            std::string::npos)
      << r.err;
}

// A short variant of each shipped config, swept end to end: the configs stay
// valid and runnable as the code changes.
// One test per config, so that ctest runs them side by side.
const std::vector<std::string> kShippedConfigs = {
    "cpu-bound", "files-shards", "files-small-files", "hdf5",       "io-bound",    "jpeg-folder",        "lmdb",
    "node-2ranks", "npy",        "quickstart",        "smoke",      "tar-stream",  "tfrecord",           "torch-probe",
    "torch-probe-2ranks"};

// A config added to configs/ without a test here fails: every shipped config is swept below.
TEST_F(WorkloadCli, EveryShippedConfigIsSweptBelow) {
  const fs::path configs = fs::path(FEEDTUNE_SOURCE_DIR) / "configs";
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(configs)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, kShippedConfigs);
}

class ShippedConfig : public WorkloadCli, public testing::WithParamInterface<std::string> {};

TEST_P(ShippedConfig, RunsEndToEnd) {
  const fs::path configs = fs::path(FEEDTUNE_SOURCE_DIR) / "configs";
  const std::string name = GetParam();
  const std::string source = (configs / (name + ".yaml")).string();
  // ParseConfig: the files configs name data/ paths that a checkout does not have.
  tuner::SweepConfig config = tuner::ParseConfig(ReadFile(source), source);
  EXPECT_EQ(config.name, name);
  EXPECT_NE(ReadFile(source).find("# "), std::string::npos);  // commented
  config.sweep.repeats = 1;
  config.sweep.measure_seconds = config.workload.kind == workloads::WorkloadKind::kCommand ? 0.3 : 0.15;
  config.sweep.warmup_batches = 2;
  // A command starts Python (about 3 s to import torch here) per trial and
  // rank: one worker at most keeps every phase and the fewest trials.
  config.sweep.max_workers = config.workload.kind == workloads::WorkloadKind::kCommand ? 1 : 2;
  config.sweep.prefetch_factors = {2};
  config.sweep.diagnose = false;  // the stage trials have their own tests (tests/tuner/diagnose_test.cc)
  // Short epochs: the persistent_workers trials measure whole epochs.
  if (config.workload.kind == workloads::WorkloadKind::kSynthetic) {
    config.workload.synthetic.samples = std::min<int64_t>(config.workload.synthetic.samples, 256);
  }
  if (config.workload.kind == workloads::WorkloadKind::kCommand) {
    std::vector<std::string>& argv = config.workload.command.argv;
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--samples") argv[i + 1] = "256";  // short epochs: the persistent_workers trials measure whole ones
    }
  }
  if (config.workload.kind == workloads::WorkloadKind::kFiles) {
    const std::string data = (dir_ / (name + "-data")).string();
    // decode: jpeg: real JPEG files, small ones so that the sweep stays short.
    const Result gen = config.workload.files.decode == workloads::FilesDecode::kJpeg
                           ? Run("gen-data -q --out " + data + " --layout jpeg --samples 400 --image-size 160x120")
                           : Run("gen-data -q --out " + data + " --layout " +
                                 workloads::FilesLayoutName(config.workload.files.layout) +
                                 " --samples 400 --sample-bytes 4096 --shard-bytes 400000");
    ASSERT_EQ(gen.code, 0) << gen.err;
    config.workload.files.path = data;
  }
  if (workloads::IsFormatKind(config.workload.kind)) {  // npy, hdf5, lmdb: gen-data writes each
    const std::string kind = workloads::WorkloadKindName(config.workload.kind);
    const std::string data = (dir_ / (name + "-data." + kind)).string();
    const bool sharded = config.workload.kind == workloads::WorkloadKind::kTfRecord ||
                         config.workload.kind == workloads::WorkloadKind::kTar;
    const Result gen = Run("gen-data -q --out " + data + " --layout " + kind + " --samples 400 --sample-bytes 4096" +
                           (sharded ? " --shards 4" : ""));
    ASSERT_EQ(gen.code, 0) << gen.err;
    config.workload.files.path = data;
  }
  const std::string short_config = Write(name + ".yaml", tuner::ToYaml(config));
  EXPECT_NO_THROW(tuner::LoadConfig(short_config));
  const std::string db = (dir_ / (name + ".db")).string();
  Result r = Run("sweep " + short_config + " --db " + db);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("best:"), std::string::npos) << r.out;
  if (config.workload.kind == workloads::WorkloadKind::kFiles &&
      config.workload.files.cache == workloads::CacheMode::kCold) {
    EXPECT_NE(r.err.find("evicted from the page cache before each repeat"), std::string::npos) << r.err;
  }
  r = Run("report --format json --db " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["status"], "done");
  EXPECT_EQ(report["workload"], name);
  EXPECT_GE(report["trials"].size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Shipped, ShippedConfig, testing::ValuesIn(kShippedConfigs),
                         [](const testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace feedtune
