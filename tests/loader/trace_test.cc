// The trace (loader/trace.h): the shared-memory recorder on its own, through a
// DataLoader (worker processes and threads, the pin stage), and `feedtune
// trial --trace` / `sweep --trace` through the binary: a file Perfetto loads
// (valid JSON, durations, nesting per track, named tracks, one flow per batch
// from a worker span to a step, under the cap) and paths refused before any trial.
// Labelled `loader`: CI runs it under ThreadSanitizer too, binary included.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "loader/data_loader.h"
#include "loader/trace.h"
#include "results/timeline_html.h"
#include "tests/common/run_feedtune.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::loader {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(TraceBuffer, KeepsOnlyArmedSpansAndCountsWhatAFullRingDrops) {
  const size_t bytes = TraceBuffer::RegionBytes(TraceTracks(1), 5 * 8);  // 8 events per track
  std::vector<std::byte> region(bytes + 64);
  auto aligned = std::span<std::byte>(region).subspan(
      (64 - reinterpret_cast<uintptr_t>(region.data()) % 64) % 64, bytes);
  TraceBuffer* trace = TraceBuffer::Create(aligned, TraceTracks(1), 5 * 8);
  ASSERT_EQ(TraceBuffer::Attach(aligned), trace);
  EXPECT_EQ(TraceBuffer::Attach({}), nullptr);

  trace->Record(kFirstWorkerTrack, TraceKind::kBatch, 100, 200, 1, 7, 7);  // not armed yet
  trace->Arm(1000, 2000);
  trace->Record(kFirstWorkerTrack, TraceKind::kBatch, 999, 1500, 2, 7, 7);   // starts before
  trace->Record(kFirstWorkerTrack, TraceKind::kBatch, 2000, 2100, 3, 7, 7);  // starts after
  for (int i = 0; i < 10; ++i) trace->Record(kFirstWorkerTrack, TraceKind::kSample, 1000 + i, 1001 + i, i, 7, 7);
  const auto events = trace->Events();
  ASSERT_EQ(events.size(), 8u);
  EXPECT_EQ(events.front().start_ns, 1000);
  EXPECT_EQ(events.back().batch, 7);
  EXPECT_EQ(trace->dropped(), 2);
  trace->Disarm();
  trace->Record(kMainTrack, TraceKind::kWait, 1500, 1600, 0, 7, 7);
  EXPECT_EQ(trace->Events().size(), 8u);
}

// A step must find the batch span of its index that ended last before it,
// across epochs (indices repeat), and the file must say its cap.
TEST(ChromeTrace, FlowsMatchEachStepToTheLatestBatchBeforeIt) {
  std::vector<TraceEvent> events = {
      {1000, 5000, 0, 11, 11, TraceKind::kBatch, kFirstWorkerTrack},
      {1100, 2000, 42, 11, 11, TraceKind::kSample, kFirstWorkerTrack},
      {6000, 9000, 0, kDevicePid, kDeviceStepTid, TraceKind::kStep, kStepTrack},
      {10000, 12000, 0, 11, 11, TraceKind::kBatch, kFirstWorkerTrack},  // the next epoch's batch 0
      {13000, 14000, 0, kDevicePid, kDeviceStepTid, TraceKind::kStep, kStepTrack},
  };
  std::ostringstream out;
  TraceInfo info;
  info.seconds = 0.5;
  info.device = "host-sim";
  WriteChromeTrace(out, events, info);
  const json j = json::parse(out.str());
  std::map<int, std::vector<double>> flow_ts;  // id -> [s ts, f ts]
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s" || e["ph"] == "f") flow_ts[e["id"].get<int>()].push_back(e["ts"].get<double>());
  }
  ASSERT_EQ(flow_ts.size(), 2u);
  EXPECT_EQ(flow_ts[1], (std::vector<double>{0.0, 5.0}));  // from the first batch's start to the first step
  EXPECT_EQ(flow_ts[2], (std::vector<double>{9.0, 12.0}));
  EXPECT_EQ(j["otherData"]["cap"]["seconds"], 0.5);
  EXPECT_EQ(j["otherData"]["cap"]["max_bytes"], kMaxTraceFileBytes);
}

std::shared_ptr<const Dataset> SmallDataset() {
  workloads::SyntheticOptions spec;
  spec.samples = 512;
  spec.sample_bytes = 1024;
  spec.cpu_us_per_sample = 0;
  spec.io_us_per_sample = 50;
  spec.jitter = 0;
  return std::make_shared<workloads::SyntheticDataset>(spec);
}

// The pin stage's copies are what is traced; page-locking is not needed for that.
device::HostBuffer Pinned(size_t bytes) { return device::AllocPageable(bytes); }

// Every worker records its samples and batches from its own process (or
// thread), the pin thread its copies, and each sample lies inside its batch.
void ExpectWorkerSpans(WorkerMode mode) {
  LoaderOptions options;
  options.knobs.batch_size = 8;
  options.knobs.num_workers = 2;
  options.knobs.pin_memory = true;
  options.worker_mode = mode;
  options.trace = true;
  DataLoader loader(SmallDataset(), options, Pinned);
  ASSERT_NE(loader.trace(), nullptr);
  const int64_t now = TraceNowNs();
  loader.trace()->Arm(now, now + 60'000'000'000);
  loader.StartEpoch(0);
  int batches = 0;
  while (loader.Next()) ++batches;
  loader.Shutdown();
  const auto events = loader.trace()->Events();

  std::map<int, std::vector<TraceEvent>> batch_spans;  // worker track -> its batches
  std::set<int32_t> pids;
  int samples = 0, pins = 0;
  for (const TraceEvent& e : events) {
    if (e.kind == TraceKind::kBatch) batch_spans[e.track].push_back(e);
    if (e.kind == TraceKind::kPin) {
      ++pins;
      EXPECT_EQ(e.track, kPinTrack);
      EXPECT_NE(e.tid, TraceThreadId()) << "the pin stage is its own thread";
    }
    if (e.track >= kFirstWorkerTrack) pids.insert(e.pid);
  }
  ASSERT_EQ(batch_spans.size(), 2u);
  EXPECT_EQ(batch_spans[kFirstWorkerTrack].size() + batch_spans[kFirstWorkerTrack + 1].size(),
            static_cast<size_t>(batches));
  EXPECT_EQ(pins, batches);
  if (mode == WorkerMode::kProcess) {
    EXPECT_EQ(pids.size(), 2u);
    EXPECT_EQ(pids.count(getpid()), 0u) << "worker spans come from the worker processes";
  } else {
    EXPECT_EQ(pids, std::set<int32_t>{getpid()});
  }
  for (const TraceEvent& e : events) {
    if (e.kind != TraceKind::kSample) continue;
    ++samples;
    const auto& spans = batch_spans[e.track];
    EXPECT_TRUE(std::any_of(spans.begin(), spans.end(), [&](const TraceEvent& b) {
      return b.start_ns <= e.start_ns && e.end_ns <= b.end_ns && b.pid == e.pid && b.tid == e.tid;
    })) << "sample " << e.batch << " lies in no batch of its worker";
  }
  EXPECT_EQ(samples, batches * 8);
}

TEST(TraceLoader, ProcessWorkersRecordIntoTheParentsMemory) { ExpectWorkerSpans(WorkerMode::kProcess); }
TEST(TraceLoader, ThreadWorkersAndThePinThreadRecord) { ExpectWorkerSpans(WorkerMode::kThread); }

TEST(TraceLoader, OffMeansNoRegionAndNoBuffer) {
  LoaderOptions options;
  options.knobs.num_workers = 1;
  options.worker_mode = WorkerMode::kThread;
  DataLoader loader(SmallDataset(), options, Pinned);
  EXPECT_EQ(loader.trace(), nullptr);
}

// ---- through the binary ----

class TraceCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-trace-" + std::to_string(getpid()) + "-" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (ro_mounted_) umount(ro_.c_str());
    fs::remove_all(dir_);
  }
  testing_util::CliResult Run(const std::string& args) { return testing_util::RunFeedtune(args, dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  // A folder nobody may write to: a read-only tmpfs as root (root ignores
  // permission bits), else a folder without write permission.
  std::string ReadOnlyFolder() {
    ro_ = dir_ / "ro";
    fs::create_directories(ro_);
    if (geteuid() == 0) {
      if (mount("tmpfs", ro_.c_str(), "tmpfs", MS_RDONLY, "size=64k") != 0) return {};
      ro_mounted_ = true;
    } else {
      fs::permissions(ro_, fs::perms::owner_read | fs::perms::owner_exec);
    }
    return ro_.string();
  }

  fs::path dir_;
  fs::path ro_;
  bool ro_mounted_ = false;
};

constexpr const char* kConfig = R"(name: traced
workload:
  kind: synthetic
  samples: 512
  sample_bytes: 4096
  cpu_us_per_sample: 0
  io_us_per_sample: 200
  jitter: 0
loader:
  batch_size: 8
device:
  backend: host-sim
  step_us: 2000
sweep:
  max_workers: 2
  prefetch_factors: [2]
  repeats: 1
  warmup_batches: 2
  measure_seconds: 0.3
  diagnose: false
)";

// What a trace viewer needs, checked on a parsed file (into `*parsed`).
// `workers` -1: the flows may start on a worker or on the main loop.
void CheckTraceFile(const fs::path& path, int workers, bool pinned, json* parsed = nullptr) {
  std::ifstream in(path);
  const json j = json::parse(in);  // throws (fails the test) when not valid JSON
  if (parsed != nullptr) *parsed = j;
  const auto size = static_cast<int64_t>(fs::file_size(path));
  EXPECT_LT(size, j["otherData"]["cap"]["max_bytes"].get<int64_t>());

  struct Span {
    double ts, end;
    std::string name;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> tracks;  // (pid, tid) -> spans
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<int64_t, std::string> process_names;
  std::map<int64_t, std::vector<json>> flows;
  int counters = 0;
  for (const auto& e : j["traceEvents"]) {
    const auto ids = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    const std::string ph = e["ph"];
    if (ph == "X") {
      EXPECT_TRUE(e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0) << e.dump();
      tracks[ids].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>(), e["name"]});
    } else if (ph == "M" && e["name"] == "thread_name") {
      thread_names[ids] = e["args"]["name"];
    } else if (ph == "M" && e["name"] == "process_name") {
      process_names[ids.first] = e["args"]["name"];
    } else if (ph == "s" || ph == "f") {
      flows[e["id"].get<int64_t>()].push_back(e);
    } else if (ph == "C") {
      // Other processes' CPU over the traced window (docs/trace.md), in CPUs.
      EXPECT_EQ(e["name"], "other processes' CPU") << e.dump();
      EXPECT_GE(e["args"]["CPUs"].get<double>(), 0) << e.dump();
      ++counters;
    }
  }
  EXPECT_EQ(counters, 2) << "the background's counter track: the window's start and end";
  // Spans on a track nest: each starts after the one enclosing it and ends before it ends.
  for (auto& [ids, spans] : tracks) {
    EXPECT_TRUE(thread_names.count(ids)) << "track " << ids.first << "/" << ids.second << " has no name";
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
    });
    std::vector<Span> open;
    for (const Span& s : spans) {
      while (!open.empty() && open.back().end <= s.ts) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.end, open.back().end) << s.name << " at " << s.ts << " overlaps " << open.back().name;
      }
      open.push_back(s);
    }
  }
  // Tids are unique across processes: no tid appears under two pids.
  std::map<int64_t, int64_t> pid_of_tid;
  for (const auto& [ids, name] : thread_names) {
    EXPECT_TRUE(pid_of_tid.emplace(ids.second, ids.first).second || pid_of_tid[ids.second] == ids.first);
  }
  std::set<std::string> names;
  for (const auto& [ids, name] : thread_names) names.insert(name);
  for (int w = 0; w < workers; ++w) EXPECT_TRUE(names.count("worker " + std::to_string(w))) << w;
  if (pinned) {
    EXPECT_TRUE(names.count("pin stage"));
  }
  EXPECT_TRUE(names.count("main loop"));
  EXPECT_TRUE(names.count("compute stream (model step)"));
  EXPECT_TRUE(names.count("h2d copy stream"));
  EXPECT_TRUE(std::any_of(process_names.begin(), process_names.end(),
                          [](const auto& p) { return p.second.rfind("device: ", 0) == 0; }));

  // Each flow: one start in a worker's batch span, one end in a step.
  const auto enclosing = [&](const json& e) -> const Span* {
    const auto it = tracks.find({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
    if (it == tracks.end()) return nullptr;
    const double ts = e["ts"];
    const Span* found = nullptr;
    for (const Span& s : it->second) {
      if (s.ts <= ts && ts <= s.end && (found == nullptr || s.ts >= found->ts)) found = &s;
    }
    return found;
  };
  EXPECT_GT(flows.size(), 5u);
  for (const auto& [id, pair] : flows) {
    ASSERT_EQ(pair.size(), 2u) << "flow " << id;
    EXPECT_EQ(pair[0]["ph"], "s");
    EXPECT_EQ(pair[1]["ph"], "f");
    const Span* from = enclosing(pair[0]);
    const Span* to = enclosing(pair[1]);
    ASSERT_NE(from, nullptr) << pair[0].dump();
    ASSERT_NE(to, nullptr) << pair[1].dump();
    EXPECT_EQ(from->name, "batch");
    EXPECT_EQ(to->name, "step");
    if (workers >= 0) {
      const std::string& from_track = thread_names[{pair[0]["pid"].get<int64_t>(), pair[0]["tid"].get<int64_t>()}];
      EXPECT_EQ(from_track.rfind(workers > 0 ? "worker " : "main", 0), 0u) << from_track;
    }
  }
}

TEST_F(TraceCli, TrialWritesATraceThatPerfettoLoads) {
  const std::string config = Write("c.yaml", kConfig);
  const fs::path file = dir_ / "t.json";
  const auto r = Run("trial " + config + " --set loader.num_workers=2 --set loader.pin_memory=true --trace " +
                     file.string() + " --trace-seconds 0.2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
  json j;
  CheckTraceFile(file, 2, true, &j);
  EXPECT_EQ(j["otherData"]["cap"]["seconds"], 0.2);
  EXPECT_EQ(j["otherData"]["num_workers"], 2);

  // Thread-mode workers write their rings from threads of this process (what
  // ThreadSanitizer checks when CI runs this suite under it).
  const auto t = Run("trial " + config + " --set loader.num_workers=2 --set loader.worker_mode=thread --trace " +
                     file.string() + " --trace-seconds 0.2");
  ASSERT_EQ(t.code, 0) << t.err;
  CheckTraceFile(file, 2, false);
}

TEST_F(TraceCli, WithoutWorkersTheMainLoopLoadsAndFlowsStartThere) {
  const std::string config = Write("c.yaml", kConfig);
  const fs::path file = dir_ / "t.json";
  const auto r = Run("trial " + config + " --trace " + file.string() + " --trace-seconds 0.2");
  ASSERT_EQ(r.code, 0) << r.err;
  CheckTraceFile(file, 0, false);
}

TEST_F(TraceCli, SweepTracesBaselineAndBest) {
  const std::string config = Write("c.yaml", kConfig);
  const std::string db = (dir_ / "r.db").string();
  const auto r = Run("sweep " + config + " --db " + db + " -q --trace " + dir_.string() + " --trace-seconds 0.2");
  ASSERT_EQ(r.code, 0) << r.err;
  CheckTraceFile(dir_ / "baseline.json", 0, false);
  json best;
  CheckTraceFile(dir_ / "best.json", -1, false, &best);
  EXPECT_NE(best["otherData"]["title"].get<std::string>().find("traced: "), std::string::npos);

  // The run keeps both excerpts; the HTML report draws them, baseline first.
  const fs::path html = dir_ / "r.html";
  const auto report = Run("report --db " + db + " --format html --out " + html.string());
  ASSERT_EQ(report.code, 0) << report.err;
  const std::string page = testing_util::ReadFile(html);
  const size_t section = page.find("<h2>Timeline: the baseline above the best</h2>");
  ASSERT_NE(section, std::string::npos);
  const size_t baseline = page.find("<h3>baseline: nw=0", section);
  const size_t best_row = page.find("<h3>best: ", section);
  ASSERT_NE(baseline, std::string::npos);
  ASSERT_NE(best_row, std::string::npos);
  EXPECT_LT(baseline, best_row);
  EXPECT_NE(page.find("data-row=\"main (loads)\"", baseline), std::string::npos);
  EXPECT_NE(page.find("<rect", page.find("data-row=\"step\"", baseline)), std::string::npos);
}

TEST(TimelineHtml, DrawsEachSpanOfEachRowAndNothingWithoutTimelines) {
  const std::string timelines_json =
      R"js({"baseline":{"ms":200,"knobs":"nw=0","rows":[)js"
      R"js({"name":"main (loads)","spans":[[0,50000],[100000,50000]]},{"name":"pin","spans":[]},)js"
      R"js({"name":"copy","spans":[[50000,1000]]},{"name":"step","spans":[[51000,20000],[151000,20000]]}]}})js";
  const std::string html = results::TimelineHtml(timelines_json);
  size_t rects = 0;
  for (size_t at = html.find("<rect"); at != std::string::npos; at = html.find("<rect", at + 1)) ++rects;
  EXPECT_EQ(rects, 5u);
  // 50 ms of 200 ms: a quarter of the 760 px plot, after the 90 px of labels.
  EXPECT_NE(html.find(R"(<rect x="90.0" y="20.0" width="190.0")"), std::string::npos) << html;
  EXPECT_EQ(html.find("<h3>best"), std::string::npos);
  EXPECT_EQ(results::TimelineHtml(""), "");
  EXPECT_EQ(results::TimelineHtml("not json"), "");
}

TEST_F(TraceCli, AMissingFolderFailsBeforeTheTrialNamingThePath) {
  const std::string config = Write("c.yaml", kConfig);
  const std::string file = (dir_ / "no-such-folder" / "t.json").string();
  const auto r = Run("trial " + config + " --trace " + file);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--trace " + file + ": cannot write the trace file"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "no trial may run";

  const std::string folder = (dir_ / "no-such-folder").string();
  const auto s = Run("sweep " + config + " --db " + (dir_ / "r.db").string() + " --trace " + folder);
  EXPECT_EQ(s.code, 2) << s.err;
  EXPECT_NE(s.err.find(folder + "/baseline.json"), std::string::npos) << s.err;
  EXPECT_FALSE(fs::exists(dir_ / "r.db")) << "the sweep must not start";
}

TEST_F(TraceCli, AReadOnlyFolderFailsBeforeTheTrialNamingThePath) {
  const std::string config = Write("c.yaml", kConfig);
  const std::string ro = ReadOnlyFolder();
  if (ro.empty()) GTEST_SKIP() << "root, but cannot mount a read-only tmpfs";
  const auto r = Run("trial " + config + " --trace " + ro + "/t.json");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--trace " + ro + "/t.json: cannot write the trace file"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  const auto s = Run("sweep " + config + " --db " + (dir_ / "r.db").string() + " --trace " + ro);
  EXPECT_EQ(s.code, 2) << s.err;
  EXPECT_NE(s.err.find(ro + "/baseline.json"), std::string::npos) << s.err;
}

}  // namespace
}  // namespace feedtune::loader
