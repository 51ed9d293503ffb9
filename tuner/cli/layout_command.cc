// `feedtune layout PATH`: which on-disk layout of this dataset feeds fastest
// on this box, cold (docs/layout.md#feedtune-layout-path). A sample of the dataset
// is written in each candidate layout (layout/candidates.h) to a scratch
// folder; each is measured by `feedtune trial` runs of this binary, the same
// trials a sweep runs (cache: cold evicts and mincore-checks before each
// window), over the worker doubling and then warm at its best; the answer
// (layout/advice.h) is printed as a table or JSON.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <span>

#include <nlohmann/json.hpp>

#include "layout/advice.h"
#include "layout/candidates.h"
#include "layout/source.h"
#include "results/fingerprint.h"
#include "results/layout_report.h"
#include "results/store.h"
#include "results/units.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/version.h"
#include "tuner/config/config.h"
#include "tuner/search/cold_doubling.h"
#include "workloads/crc32c.h"
#include "workloads/format_io.h"
#include "workloads/remote_dataset.h"

namespace feedtune::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLayoutUsage = R"(Usage: feedtune layout PATH [options]

Which on-disk layout of the dataset at PATH feeds the loader fastest on this
box, read cold. PATH is any dataset `feedtune convert` reads (a folder of
files or JPEGs, an ImageFolder tree, .npy, HDF5, LMDB, TFRecord, tar shards).

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

Output: progress on stderr; the table (or --format json: {"dataset",
"sample", "machine", "candidates": [...], "named", "why", "layout_matters"})
on stdout. The scratch folder is removed at the end unless --keep. The
answer is stored in the results file (--db) as a run with this host's
fingerprint: a trial per measurement (phases "layout-cold: NAME" and
"layout-warm: NAME"), the named layout's best cold trial as the run's best,
the source's as its baseline, its kind "layout" and the answer's JSON with it.

Examples:
  feedtune layout data/jpeg
  feedtune layout data/jpeg --decode none          (the job decodes on the GPU)
  feedtune layout data/bad-chunks.h5 --cpu-us-per-sample 200 --format json
  feedtune layout data/train --scratch /mnt/fast/tmp --sample-mb 256 --keep)";

struct LayoutRequest {
  std::string path, scratch, db = kDefaultDb, format = "table";
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

TrialOutcome RunTrialOf(const LayoutRequest& r, const std::string& config, int workers, bool cold,
                        const std::string& err_path, double measure_seconds, int repeats) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", measure_seconds);
  const std::vector<std::string> argv = {SelfExe(), "trial", config, "--json",
                                         "--set", "loader.num_workers=" + std::to_string(workers),
                                         "--set", std::string("workload.cache=") + (cold ? "cold" : "warm"),
                                         "--set", std::string("sweep.measure_seconds=") + seconds,
                                         "--set", "sweep.repeats=" + std::to_string(repeats),
                                         "--db", r.db};
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
    if (j.at("status") == "ok") {
      t.ok = true;
      t.rate = {j.at("samples_per_s").get<double>(), j.at("ci")[0].get<double>(), j.at("ci")[1].get<double>(),
                workers};
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
TrialOutcome ColdPoint(const LayoutRequest& r, const std::string& config, int workers, int64_t count,
                       const std::string& err_path, double* passes) {
  TrialOutcome t = RunTrialOf(r, config, workers, true, err_path, r.measure_seconds, r.repeats);
  *passes = t.ok ? t.rate.median * r.measure_seconds / static_cast<double>(count) : 0;
  if (*passes <= 1) return t;
  const double shorter = std::max(kShortestWindow, 0.8 * static_cast<double>(count) / t.rate.median);
  const int repeats = std::clamp(static_cast<int>(std::lround(r.repeats * r.measure_seconds / shorter)), r.repeats,
                                 std::max(r.repeats, kMostShortWindows));
  t = RunTrialOf(r, config, workers, true, err_path, shorter, repeats);
  *passes = t.ok ? t.rate.median * shorter / static_cast<double>(count) : 0;
  return t;
}

// The config `feedtune trial` reads candidate `c` with, written beside the
// candidates: the loader alone (host-sim, no step), the job's CPU cost.
std::string WriteTrialConfig(const LayoutRequest& r, const layout::Candidate& c) {
  const std::string config = (fs::path(r.scratch) / (Slug(c.name) + ".yaml")).string();
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
  std::vector<results::TrialRecord> records;  // every trial, for the results file
  std::optional<size_t> best_record;          // into records: the best's
  bool interrupted = false;
};

ColdMeasurement MeasureCold(const LayoutRequest& r, const std::string& config, const std::string& label, int64_t count,
                         bool sample_is_part, const std::string& err_path, const std::atomic<bool>& stop) {
  ColdMeasurement out;
  bool upper_bound = false;  // a window read its sample warm: that note stands over the cache's
  const auto measure = [&](int workers) {
    double passes = 0;
    const TrialOutcome t = ColdPoint(r, config, workers, count, err_path, &passes);
    if (passes > kMostColdPasses) {
      upper_bound = true;
      out.note = {"a cold window read the sample " + std::to_string(passes).substr(0, 4) + " times even at " +
                      std::to_string(kShortestWindow).substr(0, 4) + " s, so its later passes were warm (the cold " +
                      "figure is an upper bound)" +
                      (sample_is_part ? "; give a larger --sample-mb" : ": the whole dataset is read that fast here"),
                  std::nullopt};
    }
    if (!t.cache_note.empty() && !upper_bound) out.note = {t.cache_note, t.resident_fraction};
    if (!r.quiet) {
      std::fprintf(stderr, "layout: %s, cold, %d workers: %s\n", label.c_str(), workers,
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
  tuner::ColdCurve curve = tuner::ColdDoubling(r.max_workers, tuner::SweepOptions{}.gain_threshold, measure, stop);
  out.interrupted = curve.interrupted;
  out.best_record = curve.best;
  if (curve.best) {
    const results::TrialRecord& b = curve.points[*curve.best];
    out.best = {b.samples_per_s, b.ci_low, b.ci_high, b.knobs.num_workers};
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

int64_t SampleBudgetBytes(const LayoutRequest& r) {
  if (r.sample_mb > 0) return r.sample_mb * 1'000'000;
  const int64_t memory = results::ReadFingerprint().mem_total_bytes;
  return std::clamp<int64_t>(memory / 8, 16'000'000, 1'000'000'000);
}

// The answer as `--format json` prints it and the results file keeps it.
nlohmann::json AnswerJson(const LayoutRequest& r, const layout::SampleSource& source, int64_t count,
                          int64_t sample_bytes, const std::vector<layout::CandidateResult>& results,
                          const layout::Advice& advice, const results::Fingerprint& machine) {
  nlohmann::json rows = nlohmann::json::array();
  const auto rate = [](const layout::Rate& x) {
    return nlohmann::json{{"samples_per_s", x.median}, {"ci", {x.ci_low, x.ci_high}}, {"num_workers", x.workers}};
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
                    {"within_noise_of_fastest", a.within_noise_of_fastest}});
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
      {"cache_notes", cache_notes}};
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
  run.workload_name = "layout " + fs::path(r.path).filename().string();
  const std::string identity = "layout|" + source.kind() + "|" + std::to_string(source.size()) + "|" +
                               std::to_string(source.total_bytes()) + "|" + std::to_string(r.cpu_us) +
                               (r.decode_images ? "|decode jpeg" : "");
  run.workload_hash = workloads::Hex32(workloads::Crc32c(std::as_bytes(std::span(identity))));
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

// The answer as a table on stdout, with the line that says why, the
// convert command that writes the named layout, and the cache notes.
void PrintTable(const LayoutRequest& r, const layout::SampleSource& source, int64_t count,
                const std::vector<layout::CandidateResult>& results, const layout::Advice& advice,
                const results::Fingerprint& machine, const nlohmann::json& answer) {
  std::printf("%-36s %7s %24s %10s %10s %6s %9s %9s %8s\n", "layout", "workers", "cold samples/s (95% CI)", "warm",
              "on disk", "ampl.", "convert", "epoch", "payback");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& res = results[i];
    const auto& a = advice.rows[i];
    if (!res.measured) {
      std::printf("%-36s not measured: %s\n", res.name.c_str(), res.error.c_str());
      continue;
    }
    char cold[64], payback[32];
    std::snprintf(cold, sizeof cold, "%.0f (%.0f-%.0f)", res.cold.median, res.cold.ci_low, res.cold.ci_high);
    if (res.as_is) std::snprintf(payback, sizeof payback, "source");
    else if (a.payback_epochs) std::snprintf(payback, sizeof payback, "%.1f", *a.payback_epochs);
    else std::snprintf(payback, sizeof payback, "never");
    std::printf("%s%-35s %7d %24s %10.0f %10s %5.1fx %9s %9s %8s\n", static_cast<int>(i) == advice.named ? "*" : " ",
                res.name.c_str(), res.cold.workers, cold, res.warm.median,
                workloads::FormatMegabytes(static_cast<double>(a.bytes_on_disk)).c_str(), res.read_amplification,
                res.as_is ? "-" : results::Duration(a.convert_seconds).c_str(), results::Duration(a.epoch_seconds_cold).c_str(), payback);
  }
  std::printf("\nnamed: %s\n", advice.why.c_str());
  if (advice.named >= 0 && !results[static_cast<size_t>(advice.named)].as_is) {
    std::printf("write it: feedtune convert %s DST %s%s\n", r.path.c_str(),
                results[static_cast<size_t>(advice.named)].convert_arguments.c_str(),
                r.source.labels == "auto" ? "" : (" --labels " + r.source.labels).c_str());
  }
  std::printf("(%lld of %lld samples measured on %s, %d usable CPUs%s; on disk, convert, epoch and payback are for "
              "the whole dataset, extrapolated)\n",
              static_cast<long long>(count), static_cast<long long>(source.size()), machine.hostname.c_str(),
              machine.usable_cpus, r.decode_images ? ", each JPEG decoded, cropped and resized to 224x224" : "");
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
      "scratch", po::value(&r.scratch), "where the candidates are written (default: PATH.layout-scratch beside it)")(
      "sample-mb", po::value(&r.sample_mb)->default_value(0),
      "the sample's size in MB (0: an eighth of this box's memory, at most 1000)")(
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
      "keep", "keep the scratch folder")("quiet,q", "no progress");
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
  if (workloads::IsRemotePath(r.path)) {
    return UsageError("layout", r.path + ": layout measures a local dataset's candidates; on a store it does not "
                                "yet (convert reads an s3:// prefix: `feedtune convert " + r.path +
                                " DST --layout tar`, and sweep and trial read the result there)");
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
  const std::string err_path = (fs::path(r.scratch) / "trial.err").string();
  for (size_t k = 0; k < candidates.size() && !m.interrupted; ++k) {
    const layout::Candidate& c = candidates[k];
    layout::CandidateResult res;
    res.name = c.name;
    res.as_is = c.as_is;
    if (!c.as_is) res.convert_arguments = layout::ConvertArguments(c);
    try {
      if (!written.count(c.data)) written[c.data] = layout::WriteCandidate(c, sample, stop);
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
    ColdMeasurement cold = MeasureCold(r, config, label, count, sample_is_part, err_path, stop);
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
    const TrialOutcome warm = RunTrialOf(r, config, best.workers, false, err_path, r.measure_seconds, r.repeats);
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
    res.cache = cold.note;
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
  } catch (const std::exception& e) {
    return UsageError("layout", e.what());
  }
  const bool jpegs = source->payload_extension() == "jpg";
  if (r.decode == "jpeg" && !jpegs) {
    return UsageError("layout", "--decode jpeg: the samples of " + r.path + " are '" +
                                    source->payload_extension() + "', not JPEGs; give --decode none, or " +
                                    "--cpu-us-per-sample for the job's own decode");
  }
  r.decode_images = jpegs && r.decode != "none";
  if (r.scratch.empty()) {
    fs::path p = fs::absolute(r.path);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "data/jpeg/"
    r.scratch = (p.parent_path() / (p.filename().string() + ".layout-scratch")).string();
  }
  std::error_code ec;
  if (fs::exists(r.scratch, ec) && !fs::is_empty(r.scratch, ec)) {
    return UsageError("layout", "--scratch " + r.scratch + " exists and is not empty; choose another, or remove it");
  }
  // The sample: spread over the dataset, sized from the box's memory.
  const int64_t count = SampleCount(r, *source);
  const auto sample = layout::SubsetOf(*source, layout::SpreadIndices(source->size(), count));
  const auto candidates = layout::PlanCandidates(*source, r.path, r.scratch, r.decode_images);
  if (const std::optional<int> code = MakeScratch(r, *sample, candidates.size())) return *code;
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
  if (!r.keep) fs::remove_all(r.scratch, ec);
  int status = kExitOk;
  if (m.interrupted) {
    std::cerr << "feedtune layout: interrupted" << (r.keep ? "; the candidates written so far are in " + r.scratch : "")
              << "\n";
    return kExitInterrupted;
  }

  const layout::Advice advice = layout::Advise(results, source->size(), count);
  const results::Fingerprint machine = results::ReadFingerprint();
  const nlohmann::json answer =
      AnswerJson(r, *source, count, sample->total_bytes(), results, advice, machine);
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
    PrintTable(r, *source, count, results, advice, machine, answer);
  }
  if (status != kExitOk) return status;
  return advice.named >= 0 ? kExitOk : kExitFailure;
}

}  // namespace feedtune::cli
