// The bottleneck verdict (tuner/search/verdict_rules.h): its rules on constructed stage
// trials, and real stage trials on host-sim over workloads built to be
// limited by one stage each. The real ones are short (0.3 s windows, 2
// repeats) and assert only what their construction makes certain by a wide
// margin (factors of 5 and more between the stages), so a loaded box or a
// sanitizer build does not change the answer.
#include "tuner/measure/stage_runner.h"
#include "tuner/search/verdict_rules.h"

#include <gtest/gtest.h>

#include <fcntl.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "results/store.h"
#include "tuner/config/config.h"
#include "tuner/measure/stage_dataset.h"
#include "workloads/format_io.h"

namespace feedtune::tuner {
namespace {

using results::TrialRecord;

TrialRecord StageTrial(double rate, int workers = 0, double busy = results::kNaN, double cpu_util = 0) {
  TrialRecord t;
  t.status = results::TrialStatus::kOk;
  t.knobs.num_workers = workers;
  t.samples_per_s = rate;
  t.ci_low = rate * 0.98;
  t.ci_high = rate * 1.02;
  t.worker_busy_frac = busy;
  t.cpu_util = cpu_util;
  return t;
}

TEST(ComputeVerdictTest, FetchRateIsDerivedFromPrepAndFetchAndNamesTheDisk) {
  StageTrials in;
  in.trials = {{"step", StageTrial(10000)}, {"copy", StageTrial(9000)}, {"transport", StageTrial(8000)},
               {"prep", StageTrial(1000)},  {"fetch", StageTrial(200)}};
  in.sample_bytes = 100e3;
  in.file_bytes_per_sample = 100e3;
  in.cold_configured = true;
  const results::Verdict v = ComputeVerdict(in);
  const results::StageRate* fetch = v.Find("fetch");
  ASSERT_NE(fetch, nullptr);
  // 1 / (1/200 - 1/1000) samples/s: the time the cold cache adds per sample.
  EXPECT_NEAR(fetch->samples_per_s, 250.0, 1e-6);
  EXPECT_EQ(v.bottleneck, "fetch");
  EXPECT_EQ(v.runner_up, "prep");
  EXPECT_NEAR(v.input_bound_frac, 0.98, 1e-9);  // the real loop is the cold one: 1 - 200/10000
  EXPECT_EQ(v.Band(), "highly input-bound");
  EXPECT_NE(v.advice.find("fetch: the storage delivers 25.0 MB/s"), std::string::npos) << v.advice;
  EXPECT_NE(v.advice.find("feedtune inspect"), std::string::npos) << v.advice;
}

TEST(ComputeVerdictTest, WorkerStagesUseWorkerTimeWhenWorkersOverlapTheLoop) {
  // With workers the loop runs at the slower side: the trial rates alone
  // (600 against 1000) would put prep at 1500/s, over the step's 1000/s.
  // Workers busy 90% at 600/s with 2 of them: 3 ms of worker time per
  // sample, 1.5 ms over two workers: prep alone sustains ~667/s.
  StageTrials in;
  in.trials = {{"step", StageTrial(1000)},
               {"copy", StageTrial(990)},
               {"transport", StageTrial(995, 2, 0.01)},
               {"prep", StageTrial(600, 2, 0.9)}};
  in.not_measured["fetch"] = "a synthetic workload reads no files";
  const results::Verdict v = ComputeVerdict(in);
  EXPECT_EQ(v.bottleneck, "prep");
  EXPECT_NEAR(v.Find("prep")->samples_per_s, 1.0 / (0.9 * 2 / 600 / 2 - 0.01 * 2 / 995 / 2), 1e-6);
  EXPECT_EQ(v.runner_up, "step");
  EXPECT_NEAR(v.headroom, 1000 / v.Find("prep")->samples_per_s, 1e-9);
  EXPECT_NEAR(v.input_bound_frac, 0.4, 1e-9);
  ASSERT_EQ(v.notes.size(), 1u);
  EXPECT_EQ(v.notes[0], "fetch not measured: a synthetic workload reads no files");
  const std::string text = results::VerdictText(v);
  EXPECT_NE(text.find("bottleneck: prep (fixing prep gains at most 1.5x, then step limits)"), std::string::npos)
      << text;
}

TEST(ComputeVerdictTest, BandsAndAStageWithoutCost) {
  StageTrials in;
  in.trials = {{"step", StageTrial(1000)}, {"copy", StageTrial(1010)}, {"transport", StageTrial(960)}, {"prep", StageTrial(960)}};
  const results::Verdict v = ComputeVerdict(in);
  EXPECT_TRUE(std::isnan(v.Find("copy")->samples_per_s));  // faster than the step alone: no cost
  EXPECT_NE(v.Find("copy")->note.find("no measurable cost"), std::string::npos);
  EXPECT_NEAR(v.input_bound_frac, 0.04, 1e-9);
  EXPECT_EQ(v.Band(), "not input-bound");
  results::Verdict w = v;
  w.input_bound_frac = 0.05;
  EXPECT_EQ(w.Band(), "moderately input-bound");
  w.input_bound_frac = 0.2;
  EXPECT_EQ(w.Band(), "highly input-bound");
}

TEST(ComputeVerdictTest, JsonRoundTripsAndKeepsTheContractKeys) {
  StageTrials in;
  in.trials = {{"step", StageTrial(1000)}, {"copy", StageTrial(400)}, {"transport", StageTrial(390)}, {"prep", StageTrial(380)}};
  in.sample_bytes = 1e6;
  in.not_measured["fetch"] = "a synthetic workload reads no files";
  const results::Verdict v = ComputeVerdict(in);
  const std::string json = results::VerdictToJson(v);
  for (const char* key : {"\"bottleneck\":\"copy\"", "\"runner_up\":", "\"stages\":", "\"input_bound_frac\":",
                          "\"advice\":\"copy: ", "\"ci\":["}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  const auto back = results::VerdictFromJson(json);
  ASSERT_TRUE(back);
  EXPECT_EQ(results::VerdictToJson(*back), json);
  EXPECT_FALSE(results::VerdictFromJson("{\"x\": 1}"));
}

TEST(StoreVerdictTest, StoredWithTheRunAndRendered) {
  const auto dir = std::filesystem::temp_directory_path() / ("ft-verdict-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "r.db").string();
  StageTrials in;
  in.trials = {{"step", StageTrial(1000)}, {"copy", StageTrial(400)}, {"transport", StageTrial(390)}, {"prep", StageTrial(380)}};
  in.sample_bytes = 1e6;
  const results::Verdict v = ComputeVerdict(in);
  {
    results::Store store = results::Store::Open(db);
    results::Fingerprint f;
    f.hostname = "h";
    results::RunRecord run;
    run.machine_id = store.UpsertMachine(f);
    run.workload_name = "w";
    run.id = store.BeginRun(run);
    EXPECT_FALSE(store.LoadVerdict(run.id));
    store.SaveVerdict(run.id, v);
    const auto back = store.LoadVerdict(run.id);
    ASSERT_TRUE(back);
    EXPECT_EQ(results::VerdictToJson(*back), results::VerdictToJson(v));
    EXPECT_EQ(store.schema_version(), results::Store::kSchemaVersion);
  }
  const std::string html = results::VerdictHtml(v);
  EXPECT_NE(html.find("<g class=\"stage bottleneck\" data-stage=\"copy\">"), std::string::npos) << html;
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// Real stage trials on host-sim.
class DiagnoseRunTest : public ::testing::Test {
 protected:
  results::Verdict Run(const std::string& yaml, double usable_cpus = 2) {
    const SweepConfig config =
        ParseConfig(yaml + "sweep: {repeats: 2, warmup_batches: 2, measure_seconds: 0.3}\n", "test.yaml");
    const OpenedWorkload workload = OpenWorkload(config);
    std::string note;
    const auto device = device::CreateDevice(config.device, &note);
    DiagnoseSetup setup;
    setup.config = &config;
    setup.workload = &workload;
    setup.device = device.get();
    setup.usable_cpus = usable_cpus;
    setup.copy_limits = CopyLimits;
    trials_ = RunStageTrials(setup, config.loader.knobs);
    return ComputeVerdict(trials_);
  }
  StageTrials trials_;
};

TEST_F(DiagnoseRunTest, A200MsStepIsStepBoundAndNotInputBound) {
  const results::Verdict v = Run(
      "workload: {kind: synthetic, samples: 256, sample_bytes: 4096, cpu_us_per_sample: 0, jitter: 0}\n"
      "loader: {batch_size: 8, num_workers: 0}\n"
      "device: {backend: host-sim, step_us: 200000}\n");
  EXPECT_EQ(v.bottleneck, "step") << results::VerdictText(v);
  EXPECT_EQ(v.Band(), "not input-bound") << results::VerdictText(v);
  EXPECT_NE(v.advice.find("a larger batch or a faster model is the lever"), std::string::npos) << v.advice;
  EXPECT_NEAR(v.Find("step")->samples_per_s, 40.0, 4.0);  // 8 samples per 200 ms
  EXPECT_FALSE(v.Find("fetch")->measured);
}

TEST_F(DiagnoseRunTest, PageableCopyFarSlowerThanTheStepIsCopyBoundAndTheAdviceIsPinning) {
  // The case, scaled so that it holds under ASan too: there, making an
  // 8 MB synthetic sample takes 16.5 ms (prep would be the bottleneck), so the
  // samples are 1 MB and the pageable link 0.1 GB/s: the same 8:1 copy-to-make
  // ratio of bytes to bandwidth, 10 ms of modelled copy per sample (100/s)
  // against about 2 ms to make one under ASan and 1 ms of step per batch.
  const results::Verdict v = Run(
      "workload: {kind: synthetic, samples: 32, sample_bytes: 1000000, cpu_us_per_sample: 0, jitter: 0}\n"
      "loader: {batch_size: 2, num_workers: 0, pin_memory: false}\n"
      "device: {backend: host-sim, step_us: 1000, host_sim: {h2d_gbps_pinned: 25, h2d_gbps_pageable: 0.1}}\n");
  EXPECT_EQ(v.bottleneck, "copy") << results::VerdictText(v);
  // The modelled copy alone takes 10 ms per sample (100/s); host-sim's
  // pageable staging is a real memcpy on top.
  EXPECT_LT(v.Find("copy")->samples_per_s, 110) << results::VerdictText(v);
  EXPECT_NE(v.advice.find("pin_memory=True"), std::string::npos) << v.advice;
  EXPECT_NE(v.advice.find("measured here: pinned"), std::string::npos) << v.advice;
  ASSERT_TRUE(trials_.copy_other_pinning);
  EXPECT_TRUE(trials_.copy_other_pinning->knobs.pin_memory);
  EXPECT_EQ(v.Band(), "highly input-bound");
}

TEST_F(DiagnoseRunTest, TwoMsOfCpuPerSampleOnTwoCpusIsPrepBound) {
  // At most ~1000 samples/s from two CPUs against 8000/s from the step.
  const results::Verdict v = Run(
      "workload: {kind: synthetic, samples: 512, sample_bytes: 4096, cpu_us_per_sample: 2000, jitter: 0}\n"
      "loader: {batch_size: 8, num_workers: 2}\n"
      "device: {backend: host-sim, step_us: 1000}\n");
  EXPECT_EQ(v.bottleneck, "prep") << results::VerdictText(v);
  EXPECT_LT(v.Find("prep")->samples_per_s, 1200) << results::VerdictText(v);
  EXPECT_NE(v.advice.find("of CPU per sample on 2 usable CPUs: at most "), std::string::npos) << v.advice;
  EXPECT_EQ(v.Band(), "highly input-bound");
}

// One file per sample whose read waits a modelled 2 ms of storage latency
// when its pages are not in the page cache (mincore), as a slow disk would:
// only a cold cache makes it slow. Where the box can drop its page cache the
// verdict must be fetch-bound, with the disk's MB/s in the advice; where it
// cannot (tmpfs), it must say that fetch was not measured and why, and must
// not blame fetch. (Real cold reads on a VM are often served from the host's
// cache, too fast to be the bottleneck: hence the model.)
class ColdLatencyFiles final : public loader::Dataset {
 public:
  ColdLatencyFiles(std::vector<std::string> files, int64_t bytes) : files_(std::move(files)), bytes_(bytes) {}
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  int64_t max_sample_bytes() const override { return bytes_; }
  int64_t Read(int64_t index, std::span<std::byte> out) const override {
    workloads::UniqueFd fd(::open(files_[static_cast<size_t>(index)].c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) throw std::runtime_error("open failed");
    if (workloads::ResidentBytes(fd.get(), bytes_) < bytes_) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    int error = 0;
    return static_cast<int64_t>(workloads::PreadFull(fd.get(), out.first(static_cast<size_t>(bytes_)), 0, &error));
  }

 private:
  const std::vector<std::string> files_;
  const int64_t bytes_;
};

TEST(DiagnoseFetchTest, AWaitBoundFileWorkloadReadColdIsFetchBound) {
  const auto dir = std::filesystem::temp_directory_path() / ("ft-diag-files-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string block(16384, 'x');
  for (int i = 0; i < 256; ++i) {
    std::ofstream(dir / ("s" + std::to_string(1000 + i) + ".bin"), std::ios::binary) << block;
  }
  const SweepConfig config = ParseConfig("workload: {kind: files, path: " + dir.string() +
                                             ", layout: files, cpu_us_per_sample: 0}\n"
                                             "loader: {batch_size: 8, num_workers: 0}\n"
                                             "device: {backend: host-sim, step_us: 100}\n"
                                             "sweep: {repeats: 2, warmup_batches: 2, measure_seconds: 0.3}\n",
                                         "test.yaml");
  OpenedWorkload workload;
  workload.stages = std::make_shared<StageDataset>(std::make_shared<ColdLatencyFiles>(DataFiles(dir.string()), 16384));
  workload.dataset = workload.stages;
  std::string note;
  const auto device = device::CreateDevice(config.device, &note);
  DiagnoseSetup setup;
  setup.config = &config;
  setup.workload = &workload;
  setup.device = device.get();
  const StageTrials trials = RunStageTrials(setup, config.loader.knobs);
  const results::Verdict v = ComputeVerdict(trials);
  EXPECT_NEAR(trials.file_bytes_per_sample, 16384.0, 1e-9);
  const results::StageRate* fetch = v.Find("fetch");
  ASSERT_NE(fetch, nullptr);
  if (EvictFiles(DataFiles(dir.string())).resident_frac() > 0.5) {
    EXPECT_FALSE(fetch->measured);
    EXPECT_NE(fetch->note.find("the page cache could not be dropped"), std::string::npos) << fetch->note;
    EXPECT_NE(v.bottleneck, "fetch");
  } else {
    EXPECT_EQ(v.bottleneck, "fetch") << results::VerdictText(v);
    EXPECT_LT(fetch->samples_per_s, 600) << results::VerdictText(v);  // at least 2 ms per sample
    // Prep well above the fetch, or with no measurable cost at all (NaN: its
    // stage trial ran as fast as nothing, as one CI run measured it).
    const double prep = v.Find("prep")->samples_per_s;
    EXPECT_TRUE(std::isnan(prep) || prep > 3 * fetch->samples_per_s) << results::VerdictText(v);
    EXPECT_NE(v.advice.find("fetch: the storage delivers "), std::string::npos) << v.advice;
    EXPECT_NE(v.advice.find("KB, cold)"), std::string::npos) << v.advice;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace feedtune::tuner
