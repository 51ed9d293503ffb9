#include "tuner/measure/trial_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include "loader/data_loader.h"
#include "loader/trace.h"
#include "tuner/measure/proc_stats.h"
#include "tuner/measure/stats.h"
#include "workloads/cpu_work.h"

namespace feedtune::tuner {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Drives the loop over batches, crossing epoch boundaries as the data runs out.
class Loop {
 public:
  Loop(loader::DataLoader& loader, device::Device& device, const loader::Knobs& knobs, int sync_every,
       const std::atomic<bool>* stop, loader::DeviceTraceRecorder* recorder = nullptr)
      : loader_(loader), device_(device), knobs_(knobs), sync_every_(sync_every), stop_(stop), recorder_(recorder),
        trace_(loader.trace()), pid_(trace_ ? getpid() : 0), tid_(trace_ ? loader::TraceThreadId() : 0) {}

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
      loader_.StartEpoch(++epoch_);
      batch = loader_.Next();
      if (!batch) throw loader::LoaderError("an epoch has no batch (samples < batch_size with drop_last)");
    }
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
    return {wait, static_cast<int64_t>(batch->sample_indices.size()), batch->payload_bytes, first_of_epoch};
  }

  void Begin() {
    loader_.StartEpoch(epoch_);
  }

  // The last step delivered the last batch of its epoch.
  bool at_epoch_end() const { return at_epoch_end_; }

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
  bool at_epoch_end_ = false;
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

}  // namespace

TrialRunner::TrialRunner(const SweepConfig& config, device::Device& device,
                         std::shared_ptr<const loader::Dataset> dataset, const std::atomic<bool>* stop,
                         std::shared_ptr<loader::ForkServer> fork_server)
    : config_(config), device_(device), dataset_(std::move(dataset)), fork_server_(std::move(fork_server)),
      stop_(stop) {}

results::TrialRecord TrialRunner::MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) {
  results::TrialRecord trial;
  trial.knobs = knobs;
  last_warning_.clear();
  const int repeats = plan.repeats > 0 ? plan.repeats : config_.sweep.repeats;
  // The trial's intra-op threads, for this process and the workers it starts
  // (0: the dataset's own workload.cpu_threads).
  workloads::SetIntraOpThreads(knobs.worker_threads);
  try {
    loader::LoaderOptions options = config_.loader;
    options.knobs = knobs;
    options.trace = plan.trace != nullptr;
    loader::DataLoader data_loader(
        dataset_, options, [this](size_t bytes) { return device_.AllocPinned(bytes); }, fork_server_);
    if (!data_loader.stats().pinned_pool_locked) last_warning_ = device_.pin_warning();
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
    Loop loop(data_loader, device_, knobs, config_.device.sync_every_steps, stop_, recorder ? &*recorder : nullptr);
    loop.Begin();
    for (int i = 0; i < config_.sweep.warmup_batches; ++i) {
      loop.Step();
      if (sync_ != nullptr) sync_->AfterStep(false);
      if (i == 0) trial.time_to_first_batch_s = data_loader.stats().time_to_first_batch_s;
    }
    // Whole-epoch windows start at an epoch boundary: the warm-up runs on to
    // the end of its epoch.
    if (plan.window_epochs > 0 && config_.sweep.warmup_batches > 0) {
      while (!loop.at_epoch_end()) {
        loop.Step();
        if (sync_ != nullptr) sync_->AfterStep(false);
      }
    }
    device_.Synchronize();
    const double busy_before = data_loader.stats().worker_busy_s;
    double window_wall_s = 0;

    std::vector<double> rates, mbps, idles, p50s, p99s;
    double copy_s = 0, cpu_util = 0;
    int64_t peak_rss = 0;
    std::vector<double> boundary_ms;  // per epoch boundary: its wait beyond the window's median
    // Kept across windows, so that after the first window a batch's record
    // costs no allocation (a window of tiny batches has ~10^5 of them).
    std::vector<double> waits_us;
    std::vector<size_t> boundaries;  // steps whose wait crossed an epoch boundary
    for (int r = 0; r < repeats; ++r) {
      waits_us.clear();
      boundaries.clear();
      int64_t samples = 0, bytes = 0;
      // E.g. a cold cache: the dataset evicts its files before each window.
      if (std::string note = dataset_->BeforeRepeat(); !note.empty() && last_warning_.empty()) last_warning_ = note;
      const TreeUsage usage_before = ReadTreeUsage();
      if (r == 0 && recorder) StartTrace(*plan.trace, *data_loader.trace(), *recorder, device_);
      if (sync_ != nullptr) sync_->WindowStart();
      device_.BeginWindow();
      const auto window_start = Clock::now();
      const auto window_end = window_start + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(config_.sweep.measure_seconds));
      int epochs = 0;
      while (true) {
        const auto facts = loop.Step();
        if (facts.first_of_epoch) boundaries.push_back(waits_us.size());
        waits_us.push_back(facts.wait_s * 1e6);
        samples += facts.samples;
        bytes += facts.bytes;
        bool done = plan.window_epochs > 0 ? loop.at_epoch_end() && ++epochs >= plan.window_epochs
                                           : Clock::now() >= window_end;
        if (sync_ != nullptr) done = sync_->AfterStep(done);
        if (done) break;
      }
      const device::DeviceWindow window = device_.EndWindow();
      if (r == 0 && recorder) FinishTrace(*data_loader.trace(), *recorder, device_, plan.trace);
      const double wall = Seconds(Clock::now() - window_start);
      window_wall_s += wall;
      const TreeUsage usage_after = ReadTreeUsage();
      if (sync_ != nullptr) sync_->WindowEnd();

      results::RepeatRecord rep;
      rep.index = r;
      rep.wall_s = wall;
      rep.samples_per_s = static_cast<double>(samples) / wall;
      rep.mb_per_s = static_cast<double>(bytes) / wall / 1e6;
      rep.gpu_idle_frac = window.idle_frac();
      rep.wait_p50_us = Percentile(waits_us, 50);
      rep.wait_p99_us = Percentile(waits_us, 99);
      for (size_t b : boundaries) boundary_ms.push_back((waits_us[b] - rep.wait_p50_us) / 1e3);
      trial.repeat_rows.push_back(rep);
      rates.push_back(rep.samples_per_s);
      mbps.push_back(rep.mb_per_s);
      idles.push_back(rep.gpu_idle_frac);
      p50s.push_back(rep.wait_p50_us);
      p99s.push_back(rep.wait_p99_us);
      copy_s += window.copy_s;
      cpu_util = std::max(cpu_util, (usage_after.cpu_s - usage_before.cpu_s) / wall);
      peak_rss = std::max(peak_rss, usage_after.rss_bytes);
    }

    const Summary s = Summarize(rates);
    for (size_t i = 0; i < s.outliers.size(); ++i) trial.repeat_rows[i].outlier = s.outliers[i];
    trial.samples_per_s = s.median;
    trial.cv = s.cv;
    trial.ci_low = s.ci_low;
    trial.ci_high = s.ci_high;
    trial.mb_per_s = Median(mbps);
    trial.gpu_idle_frac = Median(idles);
    trial.wait_p50_us = Median(p50s);
    trial.wait_p99_us = Median(p99s);
    trial.copy_s = copy_s;
    trial.cpu_util = cpu_util;
    trial.peak_rss_bytes = peak_rss;
    trial.repeats = repeats;
    trial.epoch_boundary_ms =
        boundary_ms.empty() ? std::numeric_limits<double>::quiet_NaN() : Median(boundary_ms);
    const auto& stats = data_loader.stats();
    if (trial.time_to_first_batch_s == 0) trial.time_to_first_batch_s = stats.time_to_first_batch_s;
    if (knobs.num_workers > 0 && window_wall_s > 0) {
      trial.worker_busy_frac = (stats.worker_busy_s - busy_before) / (knobs.num_workers * window_wall_s);
    }
    trial.worker_startup_s = stats.worker_starts > 0 ? stats.worker_startup_s / stats.worker_starts
                                                     : stats.worker_startup_s;
    trial.status = "ok";
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    // A wait cut short by SIGINT/SIGTERM is the interruption, not a failure.
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) throw Interrupted();
    trial.status = "failed";
    trial.error = e.what();
  }
  return trial;
}

}  // namespace feedtune::tuner
