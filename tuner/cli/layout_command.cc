// `feedtune layout PATH`: which on-disk layout of this dataset feeds fastest
// on this box, cold (docs/layout.md#feedtune-layout-path). A sample of the dataset
// is written in each candidate layout (layout/candidates.h) to a scratch
// folder; each is measured by `feedtune trial` runs of this binary, the same
// trials a sweep runs (cache: cold evicts and mincore-checks before each
// window), over the worker doubling and then warm at its best; the answer
// (layout/advice.h) is printed as a table or JSON.
//
// On an object store (an s3:// PATH, or --scratch s3://...) the candidates
// are written to a scratch prefix and read from the store
// (layout::PlanStoreCandidates), each at its best num_workers x
// fetch_concurrency; the answer adds requests per epoch and the local
// disk's answer for the same data from the results file
// (docs/layout.md#on-an-object-store-feedtune-layout-s3).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <span>

#include <nlohmann/json.hpp>

#include "layout/advice.h"
#include "layout/candidates.h"
#include "layout/source.h"
#include "layout/store_scratch.h"
#include "results/fingerprint.h"
#include "results/layout_report.h"
#include "results/store.h"
#include "results/units.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/version.h"
#include "tuner/config/config.h"
#include "storage/location.h"
#include "storage/object_client.h"
#include "tuner/search/cold_doubling.h"
#include "workloads/crc32c.h"
#include "workloads/format_io.h"
#include "workloads/remote_dataset.h"

namespace feedtune::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLayoutUsage = R"(Usage: feedtune layout PATH [options]

Which on-disk layout of the dataset at PATH feeds the loader fastest on this
box, read cold, from a local disk or from an object store. PATH is any
dataset `feedtune convert` reads (a folder of files or JPEGs, an ImageFolder
tree, .npy, HDF5, LMDB, TFRecord, tar shards, an s3:// prefix of one object
per sample or of tar shards).

A sample of it (spread over the whole dataset; --sample-mb, by default an
eighth of this box's memory up to 1 GB, so a warm read fits the page cache and
a cold one is evicted) is written to --scratch in each candidate layout: the
source as it is; tar shards of a sixteenth of the sample read map-style and
streamed, and of a sixty-fourth streamed; LMDB; and, for samples of one size,
HDF5 with a chunk of 1 and of 32 samples, each plain and gzip:4, and npy. Each
candidate is measured by `feedtune trial` runs, cold (evicted from the page
cache before each window, mincore-checked; a window longer than a pass over
the sample is shortened, with more windows) at num_workers 0, 1, then 2, 4,
... while a doubling gains more than 5% beyond the noise (and within the
sweep's memory budgets), then warm at its best setting, each with --repeats
windows and a 95% interval.

JPEG samples (--decode auto) are decoded, cropped and resized to 224x224 in
every trial, as the job does, and one more candidate stores them decoded, as
raw pixels (`convert --pixels`): bytes on disk against decode CPU.
--cpu-us-per-sample stands for the job's other transforms, paid in every
layout alike.

The answer, per candidate: samples/s cold and warm at its best workers, bytes
on disk and read amplification, the convert time, epoch time and payback in
epochs for the whole dataset (extrapolated from the sample). The named layout
is the fastest cold, or the one with the fewest bytes (5% fewer at least)
among those within its noise; where every candidate is within the noise, the layout does not matter
here and the source as it is, is named. The line under the table gives the
`feedtune convert` command that writes it.

On an object store (PATH an s3:// prefix of one object per sample or of
tar shards, or a local folder or tar shards with --scratch s3://BUCKET/PREFIX/): the
candidates are written to the scratch prefix (by default PATH.layout-scratch/
beside PATH; it must be empty, and every object under it is deleted at the
end unless --keep) and read from there: the source as it is (an object per
sample, or its tar shards), tar shards of a sixteenth of the sample read
map-style (a ranged GET per sample), and streamed shards of a sixteenth, a
sixty-fourth and a 256th (the object's size is what a round trip is paid
for); JPEG samples are decoded in every trial there too, after their bytes
arrive, and raw pixels are a candidate, streamed in shards of a sixteenth
(about 5.7x the JPEGs' bytes and GETs, against their decode). Each is
measured cold at its best num_workers x fetch_concurrency:
requests in flight per worker doubled from 1 at one worker while they gain
(a stream's requests are its workers), then the worker doubling at that
many. Cold there means nothing is cached on this box (every read is a GET);
the store's own cache is outside the measurement, so there is no warm trial.
The table adds fc and requests per epoch (the GETs of an epoch of the whole
dataset), says what is not a candidate (LMDB, HDF5 and npy are not read
from a store; raw pixels with --decode none), and whether the winner
differs from the one this box named on a local disk for the same data and
decode (the latest such answer in --db).
The sample is 256 MB by default there (--sample-mb).

Output: progress on stderr; the table (or --format json: {"dataset",
"sample", "machine", "candidates": [...], "named", "why", "layout_matters",
"store"}) on stdout. The scratch folder is removed at the end unless --keep. The
answer is stored in the results file (--db) as a run with this host's
fingerprint: a trial per measurement (phases "layout-cold: NAME" and
"layout-warm: NAME"), the named layout's best cold trial as the run's best,
the source's as its baseline, its kind "layout" and the answer's JSON with it.

Examples:
  feedtune layout data/jpeg
  feedtune layout data/jpeg --decode none          (the job decodes on the GPU)
  feedtune layout data/bad-chunks.h5 --cpu-us-per-sample 200 --format json
  feedtune layout data/train --scratch /mnt/fast/tmp --sample-mb 256 --keep
  feedtune layout s3://bucket/train/ --labels folder      (scratch s3://bucket/train.layout-scratch/)
  feedtune layout data/train --scratch s3://bucket/scratch/   (would it read faster on the store, and how))";

struct LayoutRequest {
  std::string path, scratch, db = kDefaultDb, format = "table";
  // The candidates are written to an s3:// scratch prefix and read from the
  // store (the source is one, or --scratch names one):
  // docs/layout.md#on-an-object-store-feedtune-layout-s3.
  bool on_store = false;
  // Where the trials' configs and their stderr go: the scratch folder, or on
  // a store a local temporary folder.
  std::string work;
  std::vector<std::string> left_out;  // on a store: the layouts not measured there, a line on why each
  layout::SourceOptions source;
  int64_t sample_mb = 0;  // 0: from the box's memory
  int64_t cpu_us = 0;
  std::string decode = "auto";  // auto | jpeg | none
  bool decode_images = false;   // resolved: every candidate read with decode: jpeg
  int64_t batch_size = 32;
  int max_workers = 0;  // 0: 2 x usable CPUs, at least 4
  int repeats = 3;
  double measure_seconds = 1.0;
  bool keep = false, quiet = false;
  bool jpegs = false;  // the samples are JPEGs (decoded in every trial unless --decode none)
};

std::string SelfExe() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("feedtune") : self.string();
}

std::string Slug(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

// One `feedtune trial` of a candidate: its rate, or why it did not run.
struct TrialOutcome {
  results::TrialRecord record;  // as the trial's JSON gives it, for the results file
  bool ok = false;
  bool over_budget = false;
  layout::Rate rate;
  std::string error;
  std::string cache_note;                    // the eviction's words, for the user
  std::optional<double> resident_fraction;   // and what stayed in the page cache, as a number
};

// The figures of a trial's --json line that the results file keeps.
results::TrialRecord RecordOf(const nlohmann::json& j, int workers) {
  results::TrialRecord t;
  const auto number = [&j](const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; };
  t.knobs.num_workers = workers;
  t.knobs.batch_size = j.at("config").value("batch_size", 32);
  t.status = j.at("status") == "ok" ? results::TrialStatus::kOk : results::TrialStatus::kFailed;
  if (j.contains("error") && j["error"].is_string()) t.error = j["error"].get<std::string>();
  t.samples_per_s = number("samples_per_s");
  if (j.contains("ci") && j["ci"].is_array() && j["ci"].size() == 2) {
    t.ci_low = j["ci"][0].get<double>();
    t.ci_high = j["ci"][1].get<double>();
  }
  t.mb_per_s = number("mb_per_s");
  t.gpu_idle_frac = number("gpu_idle_frac");
  t.copy_s = number("copy_s");
  t.wait_p50_us = number("wait_p50_us");
  t.wait_p99_us = number("wait_p99_us");
  t.worker_startup_s = number("worker_startup_s");
  t.cpu_util = number("cpu_util");
  t.peak_rss_bytes = static_cast<int64_t>(number("peak_rss_bytes"));
  t.repeats = static_cast<int>(number("repeats"));
  t.cv = number("cv");
  return t;
}

// One trial of `config` at `workers` (and, where in_flight > 0, that many
// requests in flight per worker: loader.fetch_concurrency).
TrialOutcome RunTrialOf(const LayoutRequest& r, const std::string& config, int workers, int in_flight, bool cold,
                        const std::string& err_path, double measure_seconds, int repeats) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", measure_seconds);
  std::vector<std::string> argv = {SelfExe(), "trial", config, "--json",
                                   "--set", "loader.num_workers=" + std::to_string(workers),
                                   "--set", std::string("workload.cache=") + (cold ? "cold" : "warm"),
                                   "--set", std::string("sweep.measure_seconds=") + seconds,
                                   "--set", "sweep.repeats=" + std::to_string(repeats),
                                   "--db", r.db};
  if (in_flight > 0) {
    argv.insert(argv.end(), {"--set", "loader.fetch_concurrency=" + std::to_string(in_flight)});
  }
  std::string out;
  const int code = RunCapturing(argv, &out, err_path);
  TrialOutcome t;
  try {
    const auto j = nlohmann::json::parse(out);
    // The child's outcome as its JSON says it: refused by a budget, its note on the data's cache.
    if (j.value("status", "") == "refused") {
      t.over_budget = j.value("refused_by", "") == "budget";
      t.error = j.value("error", "refused");
      return t;
    }
    if (j.contains("warning") && j["warning"].is_string()) t.cache_note = j["warning"].get<std::string>();
    if (j.contains("cache_resident_fraction") && j["cache_resident_fraction"].is_number()) {
      t.resident_fraction = j["cache_resident_fraction"].get<double>();
    }
    t.record = RecordOf(j, workers);
    t.record.knobs.fetch_concurrency = std::max(1, in_flight);
    if (j.at("status") == "ok") {
      t.ok = true;
      t.rate = {j.at("samples_per_s").get<double>(), j.at("ci")[0].get<double>(), j.at("ci")[1].get<double>(),
                workers, in_flight};
      return t;
    }
    t.error = j.value("error", nlohmann::json("failed")).is_string() ? j.at("error").get<std::string>() : "failed";
  } catch (const std::exception&) {
    // No JSON: the child failed before measuring; its last words say why.
    std::string err;
    {
      std::ifstream in(err_path);
      err.assign(std::istreambuf_iterator<char>(in), {});
    }
    const size_t cut = err.rfind("feedtune");
    t.error = "exit " + std::to_string(code) + (cut != std::string::npos ? ": " + err.substr(cut) : "");
    while (!t.error.empty() && t.error.back() == '\n') t.error.pop_back();
  }
  return t;
}

// The shortest cold window: below it, a window's start and its first
// batches weigh on the figure.
constexpr double kShortestWindow = 0.1;
// The most windows a shortened cold point takes (see ColdPoint).
constexpr int kMostShortWindows = 15;

// One cold point: `workers` over `count` samples. A cold window is cold only
// for its first pass over the sample, so a window that reads it more than
// once is run again, shortened to 0.8 of a pass, with more windows (up to
// kMostShortWindows) so that the point still reads for about --repeats x
// --measure-seconds: short windows are noisy, and the named layout is chosen
// from these medians and intervals. *passes: how many times the shortened
// window still read the sample (over 1: its later passes were warm).
//
// On a store there is no second pass to shorten: nothing is cached on this
// box, so every pass reads from the store (every read is a GET), and the
// point is one trial at `in_flight` requests per worker.
TrialOutcome ColdPoint(const LayoutRequest& r, const std::string& config, int workers, int in_flight, int64_t count,
                       const std::string& err_path, double* passes) {
  TrialOutcome t = RunTrialOf(r, config, workers, in_flight, true, err_path, r.measure_seconds, r.repeats);
  if (r.on_store) {
    *passes = 0;
    return t;
  }
  *passes = t.ok ? t.rate.median * r.measure_seconds / static_cast<double>(count) : 0;
  if (*passes <= 1) return t;
  const double shorter = std::max(kShortestWindow, 0.8 * static_cast<double>(count) / t.rate.median);
  const int repeats = std::clamp(static_cast<int>(std::lround(r.repeats * r.measure_seconds / shorter)), r.repeats,
                                 std::max(r.repeats, kMostShortWindows));
  t = RunTrialOf(r, config, workers, in_flight, true, err_path, shorter, repeats);
  *passes = t.ok ? t.rate.median * shorter / static_cast<double>(count) : 0;
  return t;
}

// The config `feedtune trial` reads candidate `c` with, written beside the
// candidates: the loader alone (host-sim, no step), the job's CPU cost.
std::string WriteTrialConfig(const LayoutRequest& r, const layout::Candidate& c) {
  const std::string config = (fs::path(r.work) / (Slug(c.name) + ".yaml")).string();
  std::ofstream out(config);
  out << "name: layout-" << Slug(c.name) << "\nworkload:\n"
      << c.workload_yaml << "  cpu_us_per_sample: " << r.cpu_us << "\n  jitter: 0\nloader:\n  batch_size: "
      << r.batch_size << "\ndevice:\n  backend: host-sim\n  step_us: 0\nsweep:\n  repeats: " << r.repeats
      << "\n  warmup_batches: 2\n  measure_seconds: " << r.measure_seconds << "\n";
  return config;
}

// A cold window that read the sample more than this many times read its
// later passes warm (ColdPoint shortens it first).
constexpr double kMostColdPasses = 1.05;

// One candidate's cold doubling (tuner/search/cold_doubling.h), with what it
// says about the cache.
struct ColdMeasurement {
  layout::Rate best;  // median 0: nothing measured (error says why)
  std::string error;
  layout::CacheNote note;  // the cache's words, or why the figure is an upper bound (note empty: nothing)
  std::vector<results::TrialRecord> records;  // every trial of the worker doubling, for the results file
  std::optional<size_t> best_record;          // into records: the best's
  std::vector<results::TrialRecord> in_flight_records;  // on a store: the requests-in-flight doubling's trials
  bool interrupted = false;
};

// The most requests in flight per worker the store's doubling tries: the
// batch size (a worker fetches one batch at a time, so more overlap
// nothing), at most the sweep's own cap (tuner/search/fetch.cc: connections
// per process well under an open-file limit of 1024).
constexpr int kMostInFlight = 256;

// One candidate's cold measurement: on a store, for a layout read one GET
// per sample, its requests in flight per worker first, at one worker
// (tuner::ColdInFlightDoubling); then the cold worker doubling
// (tuner/search/cold_doubling.h) at that many. A stream's requests in
// flight are its workers, so it has the worker doubling only.
ColdMeasurement MeasureCold(const LayoutRequest& r, const layout::Candidate& c, const std::string& config,
                            const std::string& label, int64_t count, bool sample_is_part, const std::string& err_path,
                            const std::atomic<bool>& stop) {
  ColdMeasurement out;
  bool upper_bound = false;  // a window read its sample warm: that note stands over the cache's
  const auto measure = [&](int workers, int in_flight) {
    double passes = 0;
    const TrialOutcome t = ColdPoint(r, config, workers, in_flight, count, err_path, &passes);
    if (passes > kMostColdPasses) {
      upper_bound = true;
      out.note = {"a cold window read the sample " + std::to_string(passes).substr(0, 4) + " times even at " +
                      std::to_string(kShortestWindow).substr(0, 4) + " s, so its later passes were warm (the cold " +
                      "figure is an upper bound)" +
                      (sample_is_part ? "; give a larger --sample-mb" : ": the whole dataset is read that fast here"),
                  std::nullopt};
    }
    // On a store every candidate's note is the same (nothing cached on this
    // box): the answer says it once.
    if (!t.cache_note.empty() && !upper_bound && !r.on_store) out.note = {t.cache_note, t.resident_fraction};
    if (!r.quiet) {
      std::fprintf(stderr, "layout: %s, cold, %d workers%s: %s\n", label.c_str(), workers,
                   in_flight > 0 ? (" x " + std::to_string(in_flight) + " in flight").c_str() : "",
                   t.ok ? (std::to_string(static_cast<int64_t>(t.rate.median)) + " samples/s").c_str()
                        : t.error.c_str());
    }
    results::TrialRecord rec = t.record;
    rec.knobs.num_workers = workers;
    if (!t.ok) {
      if (!rec.error) rec.error = t.error;
      rec.status = t.over_budget ? results::TrialStatus::kSkipped : results::TrialStatus::kFailed;
      out.error = t.error;
    }
    return rec;
  };
  // THE RULE's threshold is the sweep's own default.
  const double threshold = tuner::SweepOptions{}.gain_threshold;
  int in_flight = 0;  // not the layout's knob
  if (r.on_store && !c.streamed) {
    const int most = static_cast<int>(std::min<int64_t>(kMostInFlight, r.batch_size));
    tuner::ColdCurve fetch = tuner::ColdInFlightDoubling(
        most, threshold, [&](int n) { return measure(1, n); }, stop);
    for (results::TrialRecord& rec : fetch.points) out.in_flight_records.push_back(std::move(rec));
    if (fetch.interrupted) {
      out.interrupted = true;
      return out;
    }
    if (!fetch.best) return out;  // nothing measured: the last point's error says why
    in_flight = out.in_flight_records[*fetch.best].knobs.fetch_concurrency;
  }
  tuner::ColdCurve curve =
      tuner::ColdDoubling(r.max_workers, threshold, [&](int workers) { return measure(workers, in_flight); }, stop);
  out.interrupted = curve.interrupted;
  out.best_record = curve.best;
  if (curve.best) {
    const results::TrialRecord& b = curve.points[*curve.best];
    out.best = {b.samples_per_s, b.ci_low, b.ci_high, b.knobs.num_workers, in_flight};
  }
  out.records = std::move(curve.points);
  return out;
}

// The sample's sizing: at least kFewestSampled samples (a smaller dataset
// whole); each candidate's files take about kCandidateBytesPerByte of the
// sample's bytes (an index, tar headers and padding, a format's own
// overhead), and decoded pixels kPixelsBytesPerByte of theirs.
constexpr int64_t kFewestSampled = 64;
constexpr double kCandidateBytesPerByte = 1.5;
constexpr double kPixelsBytesPerByte = 1.1;

// On a store the sample need not outsize a page cache (nothing of it is
// cached on this box): kStoreSampleBytes holds 16 shards of 16 MB, two
// stream windows each, and its four copies (the source as it is and three
// shard sizes) cost about 1 GB of uploads, and as much read back by the
// converts' verification; JPEGs decoded add their raw pixels, about 5.7x
// the sample (1.5 GB), which is the cost that candidate is measured for.
constexpr int64_t kStoreSampleBytes = 256'000'000;

int64_t SampleBudgetBytes(const LayoutRequest& r) {
  if (r.sample_mb > 0) return r.sample_mb * 1'000'000;
  if (r.on_store) return kStoreSampleBytes;
  const int64_t memory = results::ReadFingerprint().mem_total_bytes;
  return std::clamp<int64_t>(memory / 8, 16'000'000, 1'000'000'000);
}

// What an answer on a store adds (docs/layout.md#on-an-object-store-feedtune-layout-s3).
struct StoreFacts {
  std::vector<int64_t> requests_per_epoch;  // per candidate, as the results (RequestsPerEpoch)
  nlohmann::json local;                     // LocalAnswerOnRecord's, or null
  std::string local_line;                   // the answer's words on it
};

// The cold figure's words on a store: what is and is not in the measurement.
constexpr const char* kStoreColdNote =
    "cold on a store: nothing of the candidates is cached on this box (every read is a GET); the store's own cache "
    "is outside the measurement";

// The answer as `--format json` prints it and the results file keeps it.
nlohmann::json AnswerJson(const LayoutRequest& r, const layout::SampleSource& source, int64_t count,
                          int64_t sample_bytes, const std::vector<layout::CandidateResult>& results,
                          const layout::Advice& advice, const results::Fingerprint& machine,
                          const StoreFacts& store) {
  nlohmann::json rows = nlohmann::json::array();
  const auto rate = [](const layout::Rate& x) {
    return nlohmann::json{{"samples_per_s", x.median},
                          {"ci", {x.ci_low, x.ci_high}},
                          {"num_workers", x.workers},
                          {"fetch_concurrency",
                           x.fetch_concurrency > 0 ? nlohmann::json(x.fetch_concurrency) : nlohmann::json(nullptr)}};
  };
  nlohmann::json cache_notes = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& res = results[i];
    const auto& a = advice.rows[i];
    if (!res.cache.note.empty()) {
      cache_notes.push_back({{"candidate", res.name},
                             {"note", res.cache.note},
                             {"resident_fraction", res.cache.resident_fraction ? nlohmann::json(*res.cache.resident_fraction)
                                                                               : nlohmann::json(nullptr)}});
    }
    rows.push_back({{"name", res.name},
                    {"as_is", res.as_is},
                    {"measured", res.measured},
                    {"error", res.measured ? nlohmann::json(nullptr) : nlohmann::json(res.error)},
                    {"cold", res.measured ? rate(res.cold) : nlohmann::json(nullptr)},
                    {"warm", res.measured && res.warm.median > 0 ? rate(res.warm) : nlohmann::json(nullptr)},
                    {"bytes_on_disk", a.bytes_on_disk},
                    {"sample_bytes_on_disk", res.sample_bytes_on_disk},
                    {"read_amplification", res.read_amplification},
                    {"convert_seconds", a.convert_seconds},
                    {"epoch_seconds_cold", a.epoch_seconds_cold},
                    {"payback_epochs", a.payback_epochs ? nlohmann::json(*a.payback_epochs) : nlohmann::json(nullptr)},
                    {"convert_arguments", res.as_is ? nlohmann::json(nullptr) : nlohmann::json(res.convert_arguments)},
                    {"within_noise_of_fastest", a.within_noise_of_fastest},
                    {"fetch_concurrency", res.measured && res.cold.fetch_concurrency > 0
                                              ? nlohmann::json(res.cold.fetch_concurrency)
                                              : nlohmann::json(nullptr)},
                    {"requests_per_epoch", i < store.requests_per_epoch.size()
                                               ? nlohmann::json(store.requests_per_epoch[i])
                                               : nlohmann::json(nullptr)}});
  }
  nlohmann::json on_store = nullptr;
  if (r.on_store) {
    on_store = {{"scratch", r.scratch},
                {"cold", kStoreColdNote},
                {"left_out", r.left_out},
                {"local", store.local},
                {"local_line", store.local_line}};
  }
  return nlohmann::json{
      {"dataset", {{"path", r.path}, {"kind", source.kind()}, {"samples", source.size()}, {"bytes", source.total_bytes()}}},
      {"sample", {{"samples", count}, {"bytes", sample_bytes}}},
      {"machine", {{"hostname", machine.hostname}, {"usable_cpus", machine.usable_cpus},
                   {"mem_total_bytes", machine.mem_total_bytes}}},
      {"cpu_us_per_sample", r.cpu_us},
      {"decode", r.decode_images ? "jpeg" : "none"},
      {"candidates", rows},
      {"named", advice.named >= 0 ? nlohmann::json(results[static_cast<size_t>(advice.named)].name)
                                  : nlohmann::json(nullptr)},
      {"layout_matters", advice.layout_matters},
      {"why", advice.why},
      {"cache_notes", cache_notes},
      {"store", on_store}};
}

// The last part of PATH: "train" of data/train, data/train/ or s3://b/train/.
std::string DatasetName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// What makes two layout runs answers to one question, as the results file's
// workload hash: the data (its kind, samples and bytes), the job's CPU per
// sample and its decode, and whether the candidates were read from a store.
// A local copy of a store's objects (aws s3 cp) is the same data, so its
// local answer is found by the same identity without the store's mark.
std::string LayoutHash(const layout::SampleSource& source, const LayoutRequest& r, bool on_store) {
  const std::string identity = "layout|" + source.kind() + "|" + std::to_string(source.size()) + "|" +
                               std::to_string(source.total_bytes()) + "|" + std::to_string(r.cpu_us) +
                               (r.decode_images ? "|decode jpeg" : "") + (on_store ? "|on a store" : "");
  return workloads::Hex32(workloads::Crc32c(std::as_bytes(std::span(identity))));
}

// The latest answer this box (by hostname) stored in --db for the same data
// measured on a local disk (LayoutHash without the store's mark):
// {"run", "named", "named_as_is", "path"}; null when there is none, or no
// results file to read.
nlohmann::json LocalAnswerOnRecord(const LayoutRequest& r, const layout::SampleSource& source,
                                   const std::string& hostname) {
  std::error_code ec;
  if (!fs::exists(r.db, ec)) return nullptr;
  const std::string hash = LayoutHash(source, r, false);
  nlohmann::json found = nullptr;
  try {
    const results::Store store = results::Store::OpenReadOnly(r.db);
    for (const results::RunRecord& run : store.LoadRuns()) {
      if (run.kind != results::RunKind::kLayout || run.workload_hash != hash ||
          run.status != results::RunStatus::kDone || (!found.is_null() && found["run"].get<int64_t>() > run.id)) {
        continue;
      }
      const nlohmann::json answer = nlohmann::json::parse(run.answer_json, nullptr, false);
      if (answer.is_discarded() || !answer.value("named", nlohmann::json()).is_string() ||
          answer.at("machine").value("hostname", "") != hostname) {
        continue;
      }
      const std::string named = answer["named"];
      bool as_is = false;
      for (const nlohmann::json& c : answer.value("candidates", nlohmann::json::array())) {
        if (c.value("name", "") == named) as_is = c.value("as_is", false);
      }
      found = {{"run", run.id}, {"named", named}, {"named_as_is", as_is},
               {"path", answer.at("dataset").value("path", "")}};
    }
  } catch (const std::exception&) {
    return nullptr;  // a results file this build cannot read holds no answer it can compare
  }
  return found;
}

// The answer's line on the local disk's answer: the same layout (the source
// as it is counts as the same on both), another, or none on record with the
// command that measures it.
std::string LocalLine(const LayoutRequest& r, const layout::SampleSource& source, const nlohmann::json& local,
                      const layout::CandidateResult* named) {
  if (local.is_null()) {
    const bool here = !workloads::IsRemotePath(r.path);
    const bool undecoded_jpegs = r.jpegs && !r.decode_images;
    std::string options = (r.source.labels == "auto" ? "" : " --labels " + r.source.labels) +
                          (undecoded_jpegs ? std::string(" --decode none") : "") +
                          (r.cpu_us > 0 ? " --cpu-us-per-sample " + std::to_string(r.cpu_us) : "") + " --db " + r.db;
    return "on a local disk: no answer on record in " + r.db + " for this data (" + std::to_string(source.size()) +
           " samples, " + workloads::FormatMegabytes(static_cast<double>(source.total_bytes())) +
           (undecoded_jpegs ? ", --decode none" : "") + ") from this box; measure one: " +
           (here ? "feedtune layout " + r.path + options
                 : "aws s3 cp --recursive " + r.path + " DIR && feedtune layout DIR" + options);
  }
  const std::string run = "run " + std::to_string(local["run"].get<int64_t>()) + " in " + r.db + ", " +
                          local["path"].get<std::string>();
  if (named == nullptr) return "on a local disk this box named " + local["named"].get<std::string>() + " (" + run + ")";
  const bool same = named->as_is ? local["named_as_is"].get<bool>() : local["named"] == named->name;
  return same ? "on a local disk this box named the same, " + local["named"].get<std::string>() + " (" + run + ")"
              : "on a local disk this box named " + local["named"].get<std::string>() + " (" + run +
                    "): on the store the winner differs";
}

// Stores the answer as a run with this host's fingerprint: one trial per
// measurement, the named layout's best cold trial as its best, the source's
// as its baseline, and the whole answer with it (kind layout). `best_cold`:
// each candidate's best cold trial, by its position in `trials`. Returns the
// run's id; throws results::StoreError.
int64_t StoreAnswer(const LayoutRequest& r, const layout::SampleSource& source,
                    const std::vector<layout::CandidateResult>& results,
                    const std::vector<std::pair<size_t, results::TrialRecord>>& trials,
                    const std::map<size_t, size_t>& best_cold, const layout::Advice& advice,
                    const nlohmann::json& answer, const results::Fingerprint& machine, const std::string& started_at) {
  std::error_code ec;
  fs::create_directories(fs::absolute(r.db).parent_path(), ec);
  results::Store store = results::Store::Open(r.db);
  results::RunRecord run;
  run.machine_id = store.UpsertMachine(machine);
  run.workload_name = "layout " + DatasetName(r.path) + (r.on_store ? " on a store" : "");
  run.workload_hash = LayoutHash(source, r, r.on_store);
  run.kind = results::RunKind::kLayout;
  run.answer_json = answer.dump(1);
  run.backend = "host-sim";
  run.version = BuildString();
  run.started_at = started_at;
  run.id = store.BeginRun(run);
  std::map<size_t, int64_t> cold_trial;  // the best cold trial's id of each candidate
  for (size_t k = 0; k < trials.size(); ++k) {
    const auto& [index, rec] = trials[k];
    const int64_t id = store.AddTrial(run.id, rec);
    if (const auto best = best_cold.find(index); best != best_cold.end() && best->second == k) cold_trial[index] = id;
  }
  if (advice.named >= 0 && cold_trial.count(static_cast<size_t>(advice.named))) {
    run.best_trial_id = cold_trial[static_cast<size_t>(advice.named)];
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].as_is && cold_trial.count(i)) {
      run.baseline_trial_id = cold_trial[i];
      if (advice.named >= 0 && results[i].cold.median > 0) {
        run.speedup = results[static_cast<size_t>(advice.named)].cold.median / results[i].cold.median;
      }
    }
  }
  run.ended_at = NowIso8601();
  run.status = advice.named >= 0 ? results::RunStatus::kDone : results::RunStatus::kFailed;
  store.FinishRun(run);
  return run.id;
}

// The payback cell: "source", the epochs, or "never".
std::string PaybackText(const layout::CandidateResult& res, const layout::CandidateAdvice& a) {
  char payback[32];
  if (res.as_is) std::snprintf(payback, sizeof payback, "source");
  else if (a.payback_epochs) std::snprintf(payback, sizeof payback, "%.1f", *a.payback_epochs);
  else std::snprintf(payback, sizeof payback, "never");
  return payback;
}

// A row of the table: its mark, name and cells, or why it was not measured.
void PrintRow(const LayoutRequest& r, const layout::CandidateResult& res, const layout::CandidateAdvice& a,
              bool named, const StoreFacts& store, size_t i) {
  if (!res.measured) {
    std::printf("%-36s not measured: %s\n", res.name.c_str(), res.error.c_str());
    return;
  }
  char cold[64];
  std::snprintf(cold, sizeof cold, "%.0f (%.0f-%.0f)", res.cold.median, res.cold.ci_low, res.cold.ci_high);
  const std::string bytes = workloads::FormatMegabytes(static_cast<double>(a.bytes_on_disk));
  const std::string convert = res.as_is ? "-" : results::Duration(a.convert_seconds);
  if (r.on_store) {
    const std::string in_flight = res.cold.fetch_concurrency > 0 ? std::to_string(res.cold.fetch_concurrency) : "-";
    std::printf("%s%-35s %7d %4s %24s %14lld %10s %9s %9s %8s\n", named ? "*" : " ", res.name.c_str(),
                res.cold.workers, in_flight.c_str(), cold, static_cast<long long>(store.requests_per_epoch[i]),
                bytes.c_str(), convert.c_str(), results::Duration(a.epoch_seconds_cold).c_str(),
                PaybackText(res, a).c_str());
    return;
  }
  std::printf("%s%-35s %7d %24s %10.0f %10s %5.1fx %9s %9s %8s\n", named ? "*" : " ", res.name.c_str(),
              res.cold.workers, cold, res.warm.median, bytes.c_str(), res.read_amplification, convert.c_str(),
              results::Duration(a.epoch_seconds_cold).c_str(), PaybackText(res, a).c_str());
}

// The answer as a table on stdout, with the line that says why, the
// convert command that writes the named layout, and the cache notes; on a
// store, requests in flight per worker (fc) and requests per epoch for warm
// and read amplification, then what was left out, what cold means there and
// the local disk's answer.
void PrintTable(const LayoutRequest& r, const layout::SampleSource& source, int64_t count,
                const std::vector<layout::CandidateResult>& results, const layout::Advice& advice,
                const results::Fingerprint& machine, const nlohmann::json& answer, const StoreFacts& store) {
  if (r.on_store) {
    std::printf("%-36s %7s %4s %24s %14s %10s %9s %9s %8s\n", "layout", "workers", "fc", "cold samples/s (95% CI)",
                "requests/epoch", "on store", "convert", "epoch", "payback");
  } else {
    std::printf("%-36s %7s %24s %10s %10s %6s %9s %9s %8s\n", "layout", "workers", "cold samples/s (95% CI)", "warm",
                "on disk", "ampl.", "convert", "epoch", "payback");
  }
  for (size_t i = 0; i < results.size(); ++i) {
    PrintRow(r, results[i], advice.rows[i], static_cast<int>(i) == advice.named, store, i);
  }
  std::printf("\nnamed: %s\n", advice.why.c_str());
  if (r.on_store) std::printf("%s\n", store.local_line.c_str());
  if (advice.named >= 0 && !results[static_cast<size_t>(advice.named)].as_is) {
    std::printf("write it: feedtune convert %s DST %s%s\n", r.path.c_str(),
                results[static_cast<size_t>(advice.named)].convert_arguments.c_str(),
                r.source.labels == "auto" ? "" : (" --labels " + r.source.labels).c_str());
  }
  std::printf("(%lld of %lld samples measured on %s, %d usable CPUs%s; %s, convert, epoch and payback are for "
              "the whole dataset, extrapolated%s)\n",
              static_cast<long long>(count), static_cast<long long>(source.size()), machine.hostname.c_str(),
              machine.usable_cpus, r.decode_images ? ", each JPEG decoded, cropped and resized to 224x224" : "",
              r.on_store ? "requests, on store" : "on disk",
              r.on_store ? "; fc: requests in flight per worker, - for a stream, whose workers are its requests" : "");
  if (r.on_store) {
    std::printf("%s\n", kStoreColdNote);
    for (const std::string& line : r.left_out) std::printf("not a candidate: %s\n", line.c_str());
  }
  for (const std::string& line : results::CacheNoteLines(answer)) std::printf("%s\n", line.c_str());
}

}  // namespace

// How many samples the sample holds: SampleBudgetBytes of them at the
// source's mean size, at least kFewestSampled (a smaller dataset whole).
int64_t SampleCount(const LayoutRequest& r, const layout::SampleSource& source) {
  const double mean = static_cast<double>(source.total_bytes()) / static_cast<double>(source.size());
  const int64_t budget = SampleBudgetBytes(r);
  return std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(budget) / std::max(1.0, mean)),
                             std::min<int64_t>(source.size(), kFewestSampled), source.size());
}

// On a store: the scratch prefix checked empty, and a local temporary folder
// for the trials' configs (r.work). nullopt, or the exit code: a usage
// error, or 1 when the store refuses the listing.
std::optional<int> MakeStoreScratch(LayoutRequest& r) {
  try {
    layout::CheckStoreScratchEmpty(r.scratch);
  } catch (const std::invalid_argument& e) {
    return UsageError("layout", e.what());
  } catch (const storage::StorageError& e) {
    std::cerr << "feedtune layout: --scratch " << r.scratch << ": " << e.what() << "\n";
    return kExitFailure;
  }
  const fs::path base = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  std::string work = (base / "feedtune-layout-XXXXXX").string();
  if (::mkdtemp(work.data()) == nullptr) {
    return UsageError("layout", "cannot make a folder for the trials' configs under " + base.string() + ": " +
                                    std::strerror(errno) + "; set TMPDIR to a writable folder");
  }
  r.work = work;
  return std::nullopt;
}

// Removes what the layout wrote (unless --keep): the scratch folder, or on a
// store every object under the scratch prefix and the local folder of the
// trials' configs. A store that refuses a DELETE is a warning naming what is left.
void RemoveScratch(const LayoutRequest& r) {
  if (r.keep) {
    if (!r.quiet && r.on_store) {
      std::fprintf(stderr, "layout: kept the candidates under %s and their trial configs in %s\n", r.scratch.c_str(),
                   r.work.c_str());
    }
    return;
  }
  std::error_code ec;
  fs::remove_all(r.work, ec);
  if (!r.on_store) {
    fs::remove_all(r.scratch, ec);
    return;
  }
  try {
    const int64_t deleted = layout::ClearStoreScratch(r.scratch);
    if (!r.quiet) std::fprintf(stderr, "layout: deleted the %lld objects under %s\n", static_cast<long long>(deleted),
                               r.scratch.c_str());
  } catch (const storage::StorageError& e) {
    std::cerr << "feedtune layout: warning: the candidates under " << r.scratch << " are left there: " << e.what()
              << "; remove them with aws s3 rm --recursive " << r.scratch << "\n";
  }
}

// The scratch folder, made when `candidates` copies of the sample fit in its
// free space (workloads::FitsInFreeSpace): nullopt, or a usage error's exit code.
std::optional<int> MakeScratch(const LayoutRequest& r, const layout::SampleSource& sample, size_t candidates) {
  double need = static_cast<double>(sample.total_bytes()) * kCandidateBytesPerByte * static_cast<double>(candidates);
  if (r.decode_images) need += kPixelsBytesPerByte * static_cast<double>(layout::DecodedPixelsOf(sample)->total_bytes());
  const int64_t free_bytes = workloads::FreeBytesFor(r.scratch);
  if (!workloads::FitsInFreeSpace(need, free_bytes)) {
    return UsageError("layout", "--scratch " + r.scratch + ": the candidates take about " +
                                    workloads::FormatMegabytes(need) + ", but only " +
                                    workloads::FormatMegabytes(static_cast<double>(free_bytes)) +
                                    " is free there; choose another place or a smaller --sample-mb");
  }
  std::error_code ec;
  fs::create_directories(r.scratch, ec);
  if (ec) return UsageError("layout", "--scratch " + r.scratch + ": cannot create: " + ec.message());
  return std::nullopt;
}

// The request from the command line, checked: nullopt, or the exit code
// (help, or a usage error that says what to change).
std::optional<int> ParseRequest(const Args& args, LayoutRequest& r) {
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("path", po::value(&r.path)->required(), "the dataset")(
      "scratch", po::value(&r.scratch),
      "where the candidates are written: a folder, or an s3:// prefix to measure them on a store (default: "
      "PATH.layout-scratch beside PATH, a folder or a prefix)")(
      "sample-mb", po::value(&r.sample_mb)->default_value(0),
      "the sample's size in MB (0: an eighth of this box's memory, at most 1000; on a store 256)")(
      "cpu-us-per-sample", po::value(&r.cpu_us)->default_value(0),
      "the job's transforms per sample (beyond --decode), paid in every layout")(
      "decode", po::value(&r.decode)->default_value("auto"),
      "auto | jpeg | none: whether the job decodes JPEG samples (auto: when they are JPEGs)")(
      "batch-size", po::value(&r.batch_size)->default_value(32), "the loader's batch size")(
      "max-workers", po::value(&r.max_workers)->default_value(0), "the doubling's end (0: 2 x usable CPUs, >= 4)")(
      "repeats", po::value(&r.repeats)->default_value(3), "measurement windows per trial")(
      "measure-seconds", po::value(&r.measure_seconds)->default_value(1.0), "seconds per window")(
      "labels", po::value(&r.source.labels)->default_value("auto"), "as for convert")(
      "dataset", po::value(&r.source.dataset)->default_value("/images"), "HDF5: the samples' dataset")(
      "feature", po::value(&r.source.feature)->default_value(""), "TFRecord: a bytes feature")(
      "db", po::value(&r.db),
      "results file: the answer is stored there as a run, and the trials pay this host's torch costs it holds")(
      "format", po::value(&r.format)->default_value("table"), "table | json")(
      "keep", "keep the scratch folder (or the objects under the scratch prefix)")("quiet,q", "no progress");
  po::positional_options_description positional;
  positional.add("path", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kLayoutUsage, &code);
  if (!vm) return code;
  r.keep = vm->count("keep") > 0;
  r.quiet = vm->count("quiet") > 0;
  if (r.format != "table" && r.format != "json") {
    return UsageError("layout", "--format: expected table or json, got '" + r.format + "'");
  }
  if (r.repeats < 1 || r.repeats > 50) return UsageError("layout", "--repeats: expected an integer in [1, 50]");
  if (!(r.measure_seconds > 0 && r.measure_seconds <= 60)) {
    return UsageError("layout", "--measure-seconds: expected (0, 60]");
  }
  if (r.batch_size < 1) return UsageError("layout", "--batch-size: expected an integer >= 1");
  if (r.cpu_us < 0) return UsageError("layout", "--cpu-us-per-sample: expected an integer >= 0");
  const int usable = std::max(1, results::ReadFingerprint().usable_cpus);
  if (r.max_workers == 0) r.max_workers = std::max(4, 2 * usable);
  if (r.max_workers < 0 || r.max_workers > 256) {
    return UsageError("layout", "--max-workers: expected an integer in [0, 256]");
  }

  if (r.decode != "auto" && r.decode != "jpeg" && r.decode != "none") {
    return UsageError("layout", "--decode: expected auto, jpeg or none, got '" + r.decode + "'");
  }
  const bool remote_source = workloads::IsRemotePath(r.path);
  if (remote_source) {
    try {
      if (!storage::ParseLocation(r.path).is_s3()) {
        return UsageError("layout", r.path + ": a web server gives no listing; layout reads an s3:// prefix of one "
                                    "object per sample or of tar shards, or a local dataset");
      }
    } catch (const std::invalid_argument& e) {
      return UsageError("layout", e.what());
    }
  }
  if (remote_source && !r.scratch.empty() && !workloads::IsRemotePath(r.scratch)) {
    return UsageError("layout", "--scratch " + r.scratch + ": a dataset on a store is measured on the store (an "
                                "s3:// --scratch, by default beside it); to measure local layouts, copy it (aws s3 "
                                "cp --recursive " + r.path + " DIR) and run feedtune layout DIR");
  }
  r.on_store = remote_source || workloads::IsRemotePath(r.scratch);
  if (r.on_store) {
    try {
      r.scratch = layout::StoreScratchFor(r.scratch, r.path);
    } catch (const std::invalid_argument& e) {
      return UsageError("layout", e.what());
    }
  }
  return std::nullopt;
}

// Every candidate written and measured: cold over the doubling, then warm
// at its best. Stops early, with `interrupted`, when `stop` is raised.
struct Measured {
  std::vector<layout::CandidateResult> results;
  // Every trial, for the results file: its phase says the candidate and the cache.
  std::vector<std::pair<size_t, results::TrialRecord>> trials;  // (index into results, record)
  std::map<size_t, size_t> best_cold;  // each measured candidate's best cold trial: index into results -> into trials
  bool interrupted = false;
};

Measured MeasureCandidates(const LayoutRequest& r, const std::vector<layout::Candidate>& candidates,
                           const layout::SampleSource& sample, int64_t count, bool sample_is_part,
                           const std::atomic<bool>& stop) {
  Measured m;
  auto& results = m.results;
  auto& trials = m.trials;
  std::map<std::string, layout::WrittenCandidate> written;  // by folder: two candidates share the tar copy
  const std::string err_path = (fs::path(r.work) / "trial.err").string();
  for (size_t k = 0; k < candidates.size() && !m.interrupted; ++k) {
    const layout::Candidate& c = candidates[k];
    layout::CandidateResult res;
    res.name = c.name;
    res.as_is = c.as_is;
    if (!c.as_is) res.convert_arguments = layout::ConvertArguments(c);
    try {
      if (!written.count(c.data)) {
        written[c.data] = layout::WriteCandidate(c, sample, stop);
        if (!r.quiet && r.on_store) {  // a store's writes are round trips: say where the time went
          std::fprintf(stderr, "layout: [%zu/%zu] %s: written to %s in %.1f s%s\n", k + 1, candidates.size(),
                       c.name.c_str(), c.data.c_str(), written[c.data].write_seconds,
                       c.copy_files ? "" : ", then verified (read back)");
        }
      }
      const layout::WrittenCandidate& w = written[c.data];
      res.sample_bytes_on_disk = w.bytes_on_disk;
      res.write_seconds = w.write_seconds;
      res.read_amplification = w.read_amplification;
    } catch (const std::exception& e) {
      if (stop.load()) {
        m.interrupted = true;
        break;
      }
      res.measured = false;
      res.error = std::string("write: ") + e.what();
      results.push_back(res);
      continue;
    }
    const std::string config = WriteTrialConfig(r, c);
    const std::string label = "[" + std::to_string(k + 1) + "/" + std::to_string(candidates.size()) + "] " + c.name;
    ColdMeasurement cold = MeasureCold(r, c, config, label, count, sample_is_part, err_path, stop);
    for (results::TrialRecord& rec : cold.in_flight_records) {
      rec.phase = "layout-fetch: " + c.name;
      trials.emplace_back(results.size(), std::move(rec));
    }
    for (size_t i = 0; i < cold.records.size(); ++i) {
      if (cold.best_record == i) m.best_cold[results.size()] = trials.size();
      results::TrialRecord& rec = cold.records[i];
      rec.phase = "layout-cold: " + c.name;
      trials.emplace_back(results.size(), std::move(rec));
    }
    if (cold.interrupted) {
      m.interrupted = true;
      break;
    }
    const layout::Rate& best = cold.best;
    if (best.median <= 0) {
      res.measured = false;
      res.error = cold.error;
      results.push_back(res);
      continue;
    }
    res.cold = best;
    res.cache = cold.note;
    if (r.on_store) {  // warm would be the same GETs: nothing of a store is cached on this box either way
      results.push_back(res);
      continue;
    }
    const TrialOutcome warm =
        RunTrialOf(r, config, best.workers, best.fetch_concurrency, false, err_path, r.measure_seconds, r.repeats);
    if (warm.ok) {
      res.warm = warm.rate;
      results::TrialRecord rec = warm.record;
      rec.phase = "layout-warm: " + c.name;
      trials.emplace_back(results.size(), rec);
    }
    if (!r.quiet) {
      std::fprintf(stderr, "layout: %s, warm, %d workers: %s\n", label.c_str(), best.workers,
                   warm.ok ? (std::to_string(static_cast<int64_t>(warm.rate.median)) + " samples/s").c_str()
                           : warm.error.c_str());
    }
    results.push_back(res);
  }
  return m;
}

int RunLayout(const Args& args, const std::atomic<bool>& stop) {
  LayoutRequest r;
  if (const std::optional<int> code = ParseRequest(args, r)) return *code;
  std::unique_ptr<layout::SampleSource> source;
  try {
    source = layout::OpenSource(r.path, r.source);
  } catch (const storage::StorageError& e) {
    std::cerr << "feedtune layout: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    return UsageError("layout", e.what());
  }
  r.jpegs = source->payload_extension() == "jpg";
  if (r.decode == "jpeg" && !r.jpegs) {
    return UsageError("layout", "--decode jpeg: the samples of " + r.path + " are '" +
                                    source->payload_extension() + "', not JPEGs; give --decode none, or " +
                                    "--cpu-us-per-sample for the job's own decode");
  }
  r.decode_images = r.jpegs && r.decode != "none";
  if (r.scratch.empty()) {
    fs::path p = fs::absolute(r.path);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "data/jpeg/"
    r.scratch = (p.parent_path() / (p.filename().string() + ".layout-scratch")).string();
  }
  std::error_code ec;
  if (!r.on_store && fs::exists(r.scratch, ec) && !fs::is_empty(r.scratch, ec)) {
    return UsageError("layout", "--scratch " + r.scratch + " exists and is not empty; choose another, or remove it");
  }
  // The sample: spread over the dataset, sized from the box's memory (on a store, kStoreSampleBytes).
  const int64_t count = SampleCount(r, *source);
  const auto sample = layout::SubsetOf(*source, layout::SpreadIndices(source->size(), count));
  std::vector<layout::Candidate> candidates;
  if (r.on_store) {
    try {
      candidates = layout::PlanStoreCandidates(*source, r.path, r.scratch, r.jpegs, r.decode_images, &r.left_out);
    } catch (const std::invalid_argument& e) {
      return UsageError("layout", e.what());
    }
    if (const std::optional<int> code = MakeStoreScratch(r)) return *code;
  } else {
    candidates = layout::PlanCandidates(*source, r.path, r.scratch, r.decode_images);
    if (const std::optional<int> code = MakeScratch(r, *sample, candidates.size())) return *code;
    r.work = r.scratch;
  }
  if (!r.quiet) {
    std::fprintf(stderr,
                 "layout: %s (%s, %lld samples, %s): a sample of %lld samples (%s) in %zu candidate layouts in %s\n",
                 r.path.c_str(), source->kind().c_str(), static_cast<long long>(source->size()),
                 workloads::FormatMegabytes(static_cast<double>(source->total_bytes())).c_str(),
                 static_cast<long long>(count), workloads::FormatMegabytes(static_cast<double>(sample->total_bytes())).c_str(),
                 candidates.size(), r.scratch.c_str());
  }

  const std::string started_at = NowIso8601();
  const Measured m = MeasureCandidates(r, candidates, *sample, count, count < source->size(), stop);
  const auto& results = m.results;
  RemoveScratch(r);
  int status = kExitOk;
  if (m.interrupted) {
    std::cerr << "feedtune layout: interrupted" << (r.keep ? "; the candidates written so far are in " + r.scratch : "")
              << "\n";
    return kExitInterrupted;
  }

  const layout::Advice advice = layout::Advise(results, source->size(), count);
  const results::Fingerprint machine = results::ReadFingerprint();
  StoreFacts store;
  if (r.on_store) {
    for (size_t i = 0; i < results.size(); ++i) {
      store.requests_per_epoch.push_back(layout::RequestsPerEpoch(candidates[i], *source, advice.rows[i].bytes_on_disk));
    }
    store.local = LocalAnswerOnRecord(r, *source, machine.hostname);
    store.local_line = LocalLine(r, *source, store.local,
                                 advice.named >= 0 ? &results[static_cast<size_t>(advice.named)] : nullptr);
  }
  const nlohmann::json answer =
      AnswerJson(r, *source, count, sample->total_bytes(), results, advice, machine, store);
  // The run in the results file, with this host's fingerprint: one trial per
  // measurement, the named layout's cold trial as its best, the source's as
  // its baseline, and the whole answer with it (kind layout).
  try {
    const int64_t run_id = StoreAnswer(r, *source, results, m.trials, m.best_cold, advice, answer, machine, started_at);
    if (!r.quiet) std::cerr << "layout: stored as run " << run_id << " in " << r.db << "\n";
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune layout: " << e.what() << "\n";
    status = kExitFailure;
  }
  if (r.format == "json") {
    std::cout << answer.dump() << "\n";
  } else {
    PrintTable(r, *source, count, results, advice, machine, answer, store);
  }
  if (status != kExitOk) return status;
  return advice.named >= 0 ? kExitOk : kExitFailure;
}

}  // namespace feedtune::cli
