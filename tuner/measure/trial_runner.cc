#include "tuner/measure/trial_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "loader/data_loader.h"
#include "loader/trace.h"
#include "tuner/measure/kill_cause.h"
#include "tuner/measure/proc_stats.h"
#include "tuner/measure/stats.h"
#include "tuner/measure/store_reads.h"
#include "tuner/measure/worker_memory.h"
#include "workloads/cpu_work.h"

namespace feedtune::tuner {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Drives the loop over batches, crossing epoch boundaries as the data runs out.
class Loop {
 public:
  // `main_cost` (may be empty): torch's main-process costs when the loader
  // has workers: per batch from a worker, inside the wait; per worker
  // started and stopped, at each start of them.
  struct MainCost {
    const results::TorchCosts* costs;
    const workloads::CpuCalibration* calibration;
  };
  Loop(loader::DataLoader& loader, device::Device& device, const loader::Knobs& knobs, int sync_every,
       const std::atomic<bool>* stop, loader::DeviceTraceRecorder* recorder = nullptr,
       std::optional<MainCost> main_cost = std::nullopt)
      : loader_(loader), device_(device), knobs_(knobs), sync_every_(sync_every), stop_(stop), recorder_(recorder),
        trace_(loader.trace()), pid_(trace_ ? getpid() : 0), tid_(trace_ ? loader::TraceThreadId() : 0),
        main_cost_(knobs.num_workers > 0 ? main_cost : std::nullopt) {}

  struct StepFacts {
    double wait_s;
    int64_t samples;
    int64_t bytes;
    bool first_of_epoch;  // the wait crossed an epoch boundary
  };

  StepFacts Step() {
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) throw Interrupted();
    const auto start = Clock::now();
    std::optional<loader::BatchView> batch = loader_.Next();
    const bool first_of_epoch = !batch;
    if (!batch) {
      // Without persistent workers torch's main process stops its workers at
      // the epoch's end and forks new ones, one after another. The stop is a
      // wait, not CPU: the workers exit together while it joins them in
      // turn, so it charges a CPU nothing (burnt here as CPU, 16 workers'
      // stop took a third of an epoch and torch's peak moved from 16 to 8).
      if (main_cost_ && !knobs_.persistent_workers) {
        WaitMain(main_cost_->costs->MainStopWaitSeconds(knobs_.num_workers));
        PayMain(main_cost_->costs->MainStartSeconds(knobs_.num_workers));
      }
      loader_.StartEpoch(++epoch_);
      batch = loader_.Next();
      if (!batch) throw loader::LoaderError("an epoch has no batch (samples < batch_size with drop_last)");
    }
    if (main_cost_) PayMain(main_cost_->costs->MainBatchSeconds(batch->payload_bytes));
    const auto got = Clock::now();
    const double wait = Seconds(got - start);
    if (trace_ != nullptr) {
      trace_->Record(loader::kMainTrack, loader::TraceKind::kWait, loader::TraceNs(start), loader::TraceNs(got),
                     batch->index, pid_, tid_);
      recorder_->BeforeCopy(batch->index);
    }
    device_.CopyToDevice(batch->data.data(), static_cast<size_t>(batch->payload_bytes), batch->pinned,
                         knobs_.non_blocking);
    device_.Step();
    ++steps_;
    if (sync_every_ > 0 && steps_ % sync_every_ == 0) device_.Synchronize();
    at_epoch_end_ = batch->index + 1 == loader_.batches_per_epoch();
    batches_into_epoch_ = batch->index + 1;
    return {wait, static_cast<int64_t>(batch->sample_indices.size()), batch->payload_bytes, first_of_epoch};
  }

  void Begin() {
    if (main_cost_) PayMain(main_cost_->costs->MainStartSeconds(knobs_.num_workers));
    loader_.StartEpoch(epoch_);
  }

  // The last step delivered the last batch of its epoch.
  bool at_epoch_end() const { return at_epoch_end_; }
  // Epochs delivered so far, with the fraction of the current one (2.5: half
  // of the third): where a memory sample lies.
  double epoch_position() const {
    return static_cast<double>(epoch_) +
           static_cast<double>(batches_into_epoch_) / static_cast<double>(loader_.batches_per_epoch());
  }

 private:
  loader::DataLoader& loader_;
  device::Device& device_;
  const loader::Knobs knobs_;
  const int sync_every_;
  const std::atomic<bool>* stop_;
  loader::DeviceTraceRecorder* const recorder_;  // with trace_: the device's spans
  loader::TraceBuffer* const trace_;  // null: no trace
  const int32_t pid_, tid_;
  int64_t epoch_ = 0;
  int64_t steps_ = 0;
  int64_t batches_into_epoch_ = 0;
  bool at_epoch_end_ = false;
  const std::optional<MainCost> main_cost_;

  void PayMain(double seconds) const {
    workloads::BurnCpu(static_cast<int64_t>(seconds * 1e9), {}, *main_cost_->calibration);
  }
  static void WaitMain(double seconds) {
    if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
};

// Arms the trace for the first `capture.seconds` of the window about to start
// (before BeginWindow: the CUDA backend anchors its event clock there).
void StartTrace(const loader::TraceCapture& capture, loader::TraceBuffer& buffer,
                loader::DeviceTraceRecorder& recorder, device::Device& device) {
  recorder.Start();
  device.set_trace_sink(&recorder);
  const int64_t now = loader::TraceNowNs();
  buffer.Arm(now, now + static_cast<int64_t>(capture.seconds * 1e9));
}

// After the first window's EndWindow (the CUDA backend reports its spans as it
// harvests its events there): what was recorded goes to `capture`.
void FinishTrace(loader::TraceBuffer& buffer, loader::DeviceTraceRecorder& recorder, device::Device& device,
                 loader::TraceCapture* capture) {
  buffer.Disarm();
  device.set_trace_sink(nullptr);
  recorder.Stop();
  capture->events = buffer.Events();
  capture->dropped = buffer.dropped();
  capture->max_events = buffer.max_events();
  capture->recorded = true;
}

// What the windows of a trial add up to, from one repeat to the next.
struct WindowTotals {
  std::vector<double> rates, mbps, idles, p50s, p99s;
  std::vector<double> backgrounds;  // other processes' CPU, of the windows where it was read
  std::vector<size_t> counted_rows;  // the repeat rows in the figures, in order (not re-measured)
  int remeasured = 0;
  double copy_s = 0, cpu_util = 0, wall_s = 0;
  int64_t peak_rss = 0;
  std::vector<double> boundary_ms;  // per epoch boundary: its wait beyond the window's median
  // Kept across windows, so that after the first window a batch's record
  // costs no allocation (a window of tiny batches has ~10^5 of them).
  std::vector<double> waits_us;
  std::vector<size_t> boundaries;  // steps whose wait crossed an epoch boundary
  std::optional<StoreWindows> store;  // remote data: the store's reads in the windows
};

// One window's count of what went through it.
struct WindowCount {
  int64_t samples = 0, bytes = 0;
};

// The trial once its loader exists: the warm-up, the windows, and the
// figures. Holds references to what MeasurePlanned owns; lives inside it.
class TrialSession {
 public:
  struct Parts {
    const SweepConfig& config;
    device::Device& device;
    const loader::Dataset& dataset;
    RankSync* sync;  // null: one loader
    const TrialPlan& plan;
    const BackgroundMeter& meter;
    // The run's quiet reference (TrialMeasurer::SetQuietBackground); NaN:
    // no window is judged disturbed.
    double quiet_reference;
  };

  TrialSession(const Parts& parts, loader::DataLoader& data_loader, Loop& loop,
               loader::DeviceTraceRecorder* recorder, results::TrialRecord& trial, TrialNotes& notes)
      : p_(parts), loader_(data_loader), loop_(loop), recorder_(recorder), trial_(trial), notes_(notes),
        memory_(trial.knobs.num_workers, data_loader.options().worker_mode == loader::WorkerMode::kThread) {}

  // The warm-up (WarmupBatches, measurer.h), then, for whole-epoch windows,
  // on to the end of the epoch (the windows start at an epoch boundary).
  void WarmUp() {
    loop_.Begin();
    const int warmup = WarmupBatches(p_.config.sweep.warmup_batches, trial_.knobs);
    for (int i = 0; i < warmup; ++i) {
      Step();
      if (i == 0) trial_.time_to_first_batch_s = loader_.stats().time_to_first_batch_s;
    }
    if (p_.plan.window_epochs > 0 && warmup > 0) {
      while (!loop_.at_epoch_end()) Step();
    }
    p_.device.Synchronize();
    busy_before_ = loader_.stats().worker_busy_s;
  }

  // Window `r`: the steps, then its figures into the totals and the record.
  // Returns whether the window is in the trial's figures: false when other
  // processes disturbed it and `may_remeasure` (another window takes its place).
  bool MeasureWindow(int r, bool may_remeasure) {
    totals_.waits_us.clear();
    totals_.boundaries.clear();
    // E.g. a cold cache: the dataset evicts its files before each window.
    const loader::RepeatPreparation prep = p_.dataset.BeforeRepeat();
    if (!prep.note.empty() && notes_.warning.empty()) notes_.warning = prep.note;
    if (prep.resident_fraction) {
      notes_.cache_resident_fraction = std::max(notes_.cache_resident_fraction.value_or(0), *prep.resident_fraction);
    }
    TreeUsage usage_before;
    const std::optional<CpuReading> box_before = ReadEdge(&usage_before);
    memory_.Sample(loader_.worker_pids(), loop_.epoch_position());  // outside the window's time
    const bool trace = r == 0 && recorder_ != nullptr;
    if (trace) StartTrace(*p_.plan.trace, *loader_.trace(), *recorder_, p_.device);
    if (p_.sync != nullptr) p_.sync->WindowStart();
    // Remote data: what the workers read from the store while the window runs.
    const std::optional<loader::StoreReads> store_start = p_.dataset.ReadsFromStore();
    p_.device.BeginWindow();
    const auto window_start = Clock::now();
    const WindowCount count = RunWindowSteps(window_start);
    const device::DeviceWindow window = p_.device.EndWindow();
    const std::optional<loader::StoreReads> store_end = p_.dataset.ReadsFromStore();
    if (trace) FinishTrace(*loader_.trace(), *recorder_, p_.device, p_.plan.trace);
    const auto window_end = Clock::now();
    const double wall = Seconds(window_end - window_start);
    TreeUsage usage_after;
    const std::optional<CpuReading> box_after = ReadEdge(&usage_after);
    if (p_.sync != nullptr) p_.sync->WindowEnd();
    results::RepeatRecord rep;
    if (box_before && box_after) rep.background_cpu = BackgroundCpu(*box_before, *box_after);
    rep.tree_cpu = (usage_after.cpu_s - usage_before.cpu_s) / wall;
    rep.disturbed = std::isfinite(p_.quiet_reference) && std::isfinite(rep.background_cpu) &&
                    std::abs(rep.background_cpu - p_.quiet_reference) > p_.config.sweep.background.disturbed_cpu;
    rep.remeasured = rep.disturbed && may_remeasure;
    if (trace) AddBackgroundCounter(rep.background_cpu, window_start, window_end);
    AddWindow(r, count, wall, window, rep);
    totals_.peak_rss = std::max(totals_.peak_rss, usage_after.rss_bytes);
    if (rep.remeasured) return false;
    if (store_start && store_end) {
      if (!totals_.store) totals_.store.emplace();
      totals_.store->Add(*store_start, *store_end);
    }
    totals_.cpu_util = std::max(totals_.cpu_util, rep.tree_cpu);
    return true;
  }

  // The trial's figures: medians over the windows, the loader's counters and
  // the workers' memory.
  void Finish(int repeats) {
    const Summary s = Summarize(totals_.rates);
    for (size_t i = 0; i < s.outliers.size(); ++i) trial_.repeat_rows[totals_.counted_rows[i]].outlier = s.outliers[i];
    trial_.background_cpu = totals_.backgrounds.empty() ? std::numeric_limits<double>::quiet_NaN()
                                                        : Median(totals_.backgrounds);
    trial_.remeasured_windows = totals_.remeasured;
    trial_.samples_per_s = s.median;
    trial_.cv = s.cv;
    trial_.ci_low = s.ci_low;
    trial_.ci_high = s.ci_high;
    trial_.mb_per_s = Median(totals_.mbps);
    trial_.gpu_idle_frac = Median(totals_.idles);
    trial_.wait_p50_us = Median(totals_.p50s);
    trial_.wait_p99_us = Median(totals_.p99s);
    trial_.copy_s = totals_.copy_s;
    trial_.cpu_util = totals_.cpu_util;
    trial_.peak_rss_bytes = totals_.peak_rss;
    trial_.repeats = repeats;
    trial_.epoch_boundary_ms = totals_.boundary_ms.empty() ? std::numeric_limits<double>::quiet_NaN()
                                                           : Median(totals_.boundary_ms);
    const auto& stats = loader_.stats();
    if (trial_.time_to_first_batch_s == 0) trial_.time_to_first_batch_s = stats.time_to_first_batch_s;
    const int workers = trial_.knobs.num_workers;
    if (workers > 0 && totals_.wall_s > 0) {
      trial_.worker_busy_frac = (stats.worker_busy_s - busy_before_) / (workers * totals_.wall_s);
    }
    trial_.worker_startup_s = stats.worker_starts > 0 ? stats.worker_startup_s / stats.worker_starts
                                                      : stats.worker_startup_s;
    memory_.Fill(&trial_);
    if (totals_.store) trial_.store = totals_.store->Figures();
  }

 private:
  // A step outside the windows; a rank tells the others it is not done.
  void Step() {
    loop_.Step();
    if (p_.sync != nullptr) p_.sync->AfterStep(false);
  }

  // The window's steps, until its epochs are done or its time is up (or, for
  // a rank, until the ranks agree to stop).
  WindowCount RunWindowSteps(Clock::time_point window_start) {
    const auto window_end = window_start + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(p_.config.sweep.measure_seconds));
    WindowCount count;
    int epochs = 0;
    while (true) {
      const auto facts = loop_.Step();
      if (facts.first_of_epoch) totals_.boundaries.push_back(totals_.waits_us.size());
      totals_.waits_us.push_back(facts.wait_s * 1e6);
      count.samples += facts.samples;
      count.bytes += facts.bytes;
      // After the step, outside its wait: new workers at an epoch's start,
      // the last figure of workers that stop at its end.
      if (memory_.Due(facts.first_of_epoch || loop_.at_epoch_end())) {
        memory_.Sample(loader_.worker_pids(), loop_.epoch_position());
      }
      bool done = p_.plan.window_epochs > 0 ? loop_.at_epoch_end() && ++epochs >= p_.plan.window_epochs
                                            : Clock::now() >= window_end;
      if (p_.sync != nullptr) done = p_.sync->AfterStep(done);
      if (done) return count;
    }
  }

  // The box and the tree at a window's edge: the tree read once, for the
  // window's CPU figure and, when the meter counts this process's tree, for
  // the background too (a node rank's meter counts the whole node's).
  std::optional<CpuReading> ReadEdge(TreeUsage* usage) const {
    if (p_.meter.tree_root() == 0) return p_.meter.Read(usage);
    *usage = ReadTreeUsage();
    return p_.meter.Read();
  }

  // The traced window's background as a counter track (docs/trace.md): one
  // value over the window, at its start and its end.
  void AddBackgroundCounter(double cpu, Clock::time_point start, Clock::time_point end) {
    if (!std::isfinite(cpu)) return;
    const char* name = "other processes' CPU";
    p_.plan.trace->counters.push_back({name, loader::TraceNs(start), cpu});
    p_.plan.trace->counters.push_back({name, loader::TraceNs(end), cpu});
  }

  // Window `r`'s repeat row, and, unless it is re-measured, its figures into
  // the totals.
  void AddWindow(int r, const WindowCount& count, double wall, const device::DeviceWindow& window,
                 results::RepeatRecord rep) {
    rep.index = r;
    rep.wall_s = wall;
    rep.samples_per_s = static_cast<double>(count.samples) / wall;
    rep.mb_per_s = static_cast<double>(count.bytes) / wall / 1e6;
    rep.gpu_idle_frac = window.idle_frac();
    rep.wait_p50_us = Percentile(totals_.waits_us, 50);
    rep.wait_p99_us = Percentile(totals_.waits_us, 99);
    trial_.repeat_rows.push_back(rep);
    if (rep.remeasured) {
      ++totals_.remeasured;
      return;
    }
    totals_.counted_rows.push_back(trial_.repeat_rows.size() - 1);
    for (size_t b : totals_.boundaries) totals_.boundary_ms.push_back((totals_.waits_us[b] - rep.wait_p50_us) / 1e3);
    if (std::isfinite(rep.background_cpu)) totals_.backgrounds.push_back(rep.background_cpu);
    totals_.rates.push_back(rep.samples_per_s);
    totals_.mbps.push_back(rep.mb_per_s);
    totals_.idles.push_back(rep.gpu_idle_frac);
    totals_.p50s.push_back(rep.wait_p50_us);
    totals_.p99s.push_back(rep.wait_p99_us);
    totals_.copy_s += window.copy_s;
    totals_.wall_s += wall;
  }

  const Parts p_;
  loader::DataLoader& loader_;
  Loop& loop_;
  loader::DeviceTraceRecorder* const recorder_;  // null: no trace
  results::TrialRecord& trial_;
  TrialNotes& notes_;
  WindowTotals totals_;
  WorkerMemorySampler memory_;
  double busy_before_ = 0;  // the workers' busy time before the first window
};

}  // namespace

TrialRunner::TrialRunner(const SweepConfig& config, device::Device& device,
                         std::shared_ptr<const loader::Dataset> dataset, const std::atomic<bool>* stop,
                         std::shared_ptr<loader::ForkServer> fork_server)
    : config_(config), device_(device), dataset_(std::move(dataset)), fork_server_(std::move(fork_server)),
      stop_(stop), meter_(FindBoxCpuSource()) {}

void TrialRunner::set_background_tree_root(pid_t root) { meter_ = BackgroundMeter(meter_.source(), root); }

results::TrialRecord TrialRunner::MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) {
  results::TrialRecord trial;
  trial.knobs = knobs;
  notes_ = {};
  const int repeats = plan.repeats > 0 ? plan.repeats : config_.sweep.repeats;
  // The trial's intra-op threads, for this process and the workers it starts
  // (0: the dataset's own workload.cpu_threads).
  workloads::SetIntraOpThreads(knobs.worker_threads);
  const OomWatch oom;  // a worker's SIGKILL names whether the OOM killer sent it
  try {
    loader::LoaderOptions options = config_.loader;
    options.knobs = knobs;
    options.trace = plan.trace != nullptr;
    loader::DataLoader data_loader(
        dataset_, options, [this](size_t bytes) { return device_.AllocPinned(bytes); }, fork_server_);
    if (!data_loader.stats().pinned_pool_locked) notes_.warning = device_.pin_warning();
    trial.pinned_alloc_s = data_loader.stats().pinned_pool_alloc_s;
    trial.batches_per_epoch = data_loader.batches_per_epoch();
    device_.Prepare(static_cast<size_t>(data_loader.batch_bytes()));

    std::optional<loader::DeviceTraceRecorder> recorder;
    if (plan.trace != nullptr) recorder.emplace(*data_loader.trace());
    // The device outlives the trial: it must not keep the recorder.
    struct SinkReset {
      device::Device& device;
      ~SinkReset() { device.set_trace_sink(nullptr); }
    } sink_reset{device_};
    std::optional<Loop::MainCost> main_cost;
    if (torch_costs_) main_cost = Loop::MainCost{&*torch_costs_, &calibration_};
    Loop loop(data_loader, device_, knobs, config_.device.sync_every_steps, stop_, recorder ? &*recorder : nullptr,
              main_cost);
    TrialSession session({config_, device_, *dataset_, sync_, plan, meter_, quiet_reference_}, data_loader, loop,
                         recorder ? &*recorder : nullptr, trial, notes_);
    session.WarmUp();
    // A window other processes disturbed is measured again, at most as many
    // times as the trial has windows (docs/measurement.md). The ranks of a
    // node trial end their windows together, so they re-measure none.
    const int remeasure_budget = sync_ == nullptr ? repeats : 0;
    for (int r = 0, counted = 0, remeasured = 0; counted < repeats; ++r) {
      if (session.MeasureWindow(r, remeasured < remeasure_budget)) {
        ++counted;
      } else {
        ++remeasured;
      }
    }
    session.Finish(repeats);
    trial.status = results::TrialStatus::kOk;
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    // A wait cut short by SIGINT/SIGTERM is the interruption, not a failure.
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) throw Interrupted();
    trial.status = results::TrialStatus::kFailed;
    trial.error = WithKillCause(e.what(), oom);
  }
  return trial;
}

}  // namespace feedtune::tuner
