#include "loader/batch_read.h"
#include "loader/data_loader.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

namespace feedtune::loader {
namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting pin thread looks at its stop flag. Wake() ends a wait
// at once; this only bounds a missed wake-up.
constexpr auto kPinPoll = std::chrono::milliseconds(200);

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int CheckedWorkers(const LoaderOptions& options) {
  const Knobs& k = options.knobs;
  if (k.batch_size < 1) throw std::invalid_argument("batch_size must be >= 1");
  if (k.num_workers < 0) throw std::invalid_argument("num_workers must be >= 0");
  if (k.num_workers > 0 && k.prefetch_factor < 1) throw std::invalid_argument("prefetch_factor must be >= 1");
  if (k.fetch_concurrency < 1) throw std::invalid_argument("fetch_concurrency must be >= 1");
  return k.num_workers;
}

// Samples one rank reads per epoch: its DistributedSampler share, padded (sampler.h).
int64_t ShareSize(int64_t samples, const LoaderOptions& options) {
  const int64_t ws = std::max(options.world_size, 1);
  return (samples + ws - 1) / ws;
}

int64_t BatchesPerEpoch(int64_t samples, const LoaderOptions& options) {
  const int64_t b = options.knobs.batch_size;
  return options.drop_last ? samples / b : (samples + b - 1) / b;
}

// A slot holds a batch; a streaming loader's also the indices its worker read.
size_t SlotBytes(const Dataset& dataset, const LoaderOptions& options) {
  const int64_t b = options.knobs.batch_size, stride = dataset.max_sample_bytes();
  return static_cast<size_t>(dataset.num_shards() > 0 ? StreamSlotBytes(b, stride) : b * stride);
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
                       PinnedAllocFn pinned_alloc, std::shared_ptr<ForkServer> fork_server)
    : dataset_(std::move(dataset)),
      options_(options),
      num_workers_(CheckedWorkers(options)),
      max_outstanding_(static_cast<int64_t>(options.knobs.prefetch_factor) * num_workers_),
      streaming_(dataset_->num_shards() > 0),
      batches_per_epoch_(streaming_ ? 0 : BatchesPerEpoch(ShareSize(dataset_->size(), options), options)),
      arena_(static_cast<int>(num_workers_ == 0 ? 1 : max_outstanding_ + 1), SlotBytes(*dataset_, options),
             options.trace ? TraceBuffer::RegionBytes(TraceTracks(num_workers_)) : 0),
      owner_pid_(static_cast<int32_t>(getpid())),
      owner_tid_(options.trace ? TraceThreadId() : 0) {
  // Before any worker maps the arena: they find the buffer laid out.
  if (options_.trace) trace_ = TraceBuffer::Create(arena_.trace_region(), TraceTracks(num_workers_));
  if (options_.knobs.pin_memory) {
    if (!pinned_alloc) throw std::invalid_argument("pin_memory needs a pinned-memory allocator");
    // One pinned buffer per slot: a batch keeps its slot number from worker to
    // consumer, so its pinned copy is never overwritten while it is held.
    // (num_workers == 0 reads into one slot; two pinned buffers alternate so
    // the previous batch's queued copy is not overwritten by the next read.)
    // Known limit: with sync_every_steps == 0 a device stream may lag more
    // than the slots allow, and a queued copy can then read a pinned buffer
    // the pin stage is refilling. Timing is torch's (its caching host allocator
    // does not wait either; it takes a new block), only the bytes on the device
    // may be torn, and the step kernel never reads them.
    const auto start = Clock::now();
    const int buffers = std::max(arena_.num_slots(), 2);
    for (int i = 0; i < buffers; ++i) {
      pinned_.push_back(pinned_alloc(arena_.slot_bytes()));
      if (!pinned_.back().pinned()) stats_.pinned_pool_locked = false;
    }
    stats_.pinned_pool_alloc_s = SecondsSince(start);
  }
  if (num_workers_ > 0) {
    if (options_.worker_mode == WorkerMode::kThread) {
      pool_ = MakeThreadWorkerPool(*dataset_, arena_, num_workers_);
    } else {
      if (fork_server && fork_server->dataset() != dataset_) {
        throw std::invalid_argument("the fork server holds another dataset than the loader's");
      }
      fork_server_ = fork_server ? std::move(fork_server) : std::make_shared<ForkServer>(dataset_);
      pool_ = MakeProcessWorkerPool(*fork_server_, arena_, num_workers_);
    }
  }
  if (streaming_) {
    int idle_workers = 0;
    batches_per_epoch_ = StreamEpochBatches(0, &idle_workers);
    if (num_workers_ == 0) inline_stream_ = std::make_unique<WorkerStream>(*dataset_);
  }
  reorder_.resize(static_cast<size_t>(arena_.num_slots()));
  slot_indices_.assign(static_cast<size_t>(arena_.num_slots()),
                       std::vector<int64_t>(static_cast<size_t>(options_.knobs.batch_size)));
}

DataLoader::~DataLoader() { Shutdown(); }

void DataLoader::Shutdown() noexcept { StopWorkers(); }

void DataLoader::StopWorkers() noexcept {
  StopPinThread();
  if (pool_ && pool_->running()) pool_->Stop();
}

void DataLoader::StartPinThread() {
  pin_stop_ = false;
  pin_queue_.clear();
  pin_thread_ = std::thread([this] { PinLoop(); });
}

void DataLoader::StopPinThread() noexcept {
  if (!pin_thread_.joinable()) return;
  {
    std::lock_guard lock(pin_mu_);
    pin_stop_ = true;
  }
  pool_->Wake();
  pin_thread_.join();
  stats_.pin_s += std::exchange(pin_thread_s_, 0.0);
}

// The pin thread: finished batches from the workers, copied into the pinned
// buffer of their slot, handed to the consumer in the order they finished
// (the consumer reorders, as torch's main thread does).
void DataLoader::PinLoop() {
  const int32_t tid = trace_ ? TraceThreadId() : 0;
  while (true) {
    {
      std::lock_guard lock(pin_mu_);
      if (pin_stop_) return;
    }
    BatchDone done;
    if (!pool_->WaitDone(&done, Clock::now() + kPinPoll)) continue;
    if (done.error.empty()) {
      const auto start = Clock::now();
      const auto slot = arena_.slot(done.slot);
      std::memcpy(pinned_[static_cast<size_t>(done.slot)].data(), slot.data(), slot.size());
      pin_thread_s_ += SecondsSince(start);
      if (trace_) trace_->Record(kPinTrack, TraceKind::kPin, TraceNs(start), TraceNowNs(), done.batch_index, owner_pid_, tid);
    }
    {
      std::lock_guard lock(pin_mu_);
      pin_queue_.push_back(std::move(done));
    }
    pin_cv_.notify_one();
  }
}

bool DataLoader::NextDone(BatchDone* done, Clock::time_point deadline) {
  if (!pin_thread_.joinable()) return pool_->WaitDone(done, deadline);
  std::unique_lock lock(pin_mu_);
  if (!pin_cv_.wait_until(lock, deadline, [this] { return !pin_queue_.empty(); })) return false;
  *done = std::move(pin_queue_.front());
  pin_queue_.pop_front();
  return true;
}

std::vector<pid_t> DataLoader::worker_pids() const {
  return pool_ && pool_->running() ? pool_->worker_pids() : std::vector<pid_t>{};
}

int64_t DataLoader::batch_bytes() const {
  return static_cast<int64_t>(options_.knobs.batch_size) * dataset_->max_sample_bytes();
}

void DataLoader::StartEpoch(int64_t epoch) {
  // An abandoned epoch may leave tasks in flight in slots we are about to
  // reuse; only a restart of the workers makes that safe.
  const bool abandoned = epoch_ >= 0 && next_to_return_ < next_to_dispatch_;
  if (abandoned) StopWorkers();

  epoch_ = epoch;
  epoch_start_ = Clock::now();
  dataset_->SetEpoch(epoch);
  if (streaming_) {
    ++stream_pass_;
    batches_per_epoch_ = StreamEpochBatches(epoch, &stats_.idle_stream_workers);
    worker_active_.assign(static_cast<size_t>(num_workers_), 1);
    next_worker_ = 0;
  } else {
    // O(1) in the dataset size: the order is computed batch by batch (sampler.h).
    plan_ = BatchPlan(EpochSampler(dataset_->size(), options_.shuffle, options_.seed, epoch, options_.rank,
                                   options_.world_size),
                      options_.knobs.batch_size, options_.drop_last);
  }
  next_to_dispatch_ = 0;
  next_to_return_ = 0;
  batches_returned_ = 0;
  held_slot_ = -1;
  for (auto& r : reorder_) r = Ready{};
  free_slots_.clear();
  for (int s = arena_.num_slots() - 1; s >= 0; --s) free_slots_.push_back(s);

  if (num_workers_ == 0) {
    if (!worker_init_done_inline_) {
      const auto start = Clock::now();
      dataset_->InitWorker(0);
      stats_.worker_startup_s += SecondsSince(start);
      worker_init_done_inline_ = true;
    }
    return;
  }
  if (!pool_->running()) {
    const auto start = Clock::now();
    pool_->Start();
    stats_.worker_startup_s += SecondsSince(start);
    ++stats_.worker_starts;
    if (options_.knobs.pin_memory) StartPinThread();
  }
  // Prime the pipeline, as torch does when the iterator is created.
  if (streaming_) {
    DispatchStreamed(max_outstanding_);
  } else {
    DispatchUpTo(max_outstanding_);
  }
}

void DataLoader::DispatchUpTo(int64_t limit) {
  while (next_to_dispatch_ < plan_.num_batches() && next_to_dispatch_ - next_to_return_ < limit &&
         !free_slots_.empty()) {
    BatchTask task;
    task.batch_index = next_to_dispatch_;
    task.slot = free_slots_.back();
    task.indices = plan_.FillBatch(next_to_dispatch_, slot_indices_[static_cast<size_t>(task.slot)]);
    task.fetch_concurrency = options_.knobs.fetch_concurrency;
    free_slots_.pop_back();
    pool_->Submit(static_cast<int>(next_to_dispatch_ % num_workers_), task);
    ++next_to_dispatch_;
  }
}

void DataLoader::ReleaseHeldSlot() {
  if (held_slot_ >= 0) {
    free_slots_.push_back(held_slot_);
    held_slot_ = -1;
  }
}

std::optional<BatchView> DataLoader::Next() {
  if (epoch_ < 0) throw std::logic_error("DataLoader::Next before StartEpoch");
  ReleaseHeldSlot();
  std::optional<BatchView> view = streaming_ ? NextStreamed() : NextMapped();
  if (!view) {
    if (!options_.knobs.persistent_workers) StopWorkers();
    return std::nullopt;
  }
  if (batches_returned_ == 0) stats_.time_to_first_batch_s = SecondsSince(epoch_start_);
  ++batches_returned_;
  return view;
}

std::optional<BatchView> DataLoader::NextMapped() {
  if (next_to_return_ >= plan_.num_batches()) return std::nullopt;
  BatchView view = num_workers_ == 0 ? ReadInline(next_to_return_) : Collect(next_to_return_);
  ++next_to_return_;
  if (num_workers_ > 0) DispatchUpTo(max_outstanding_);
  return view;
}

StreamShare DataLoader::ShareOf(int64_t epoch, int worker) const {
  StreamShare share;
  share.epoch = epoch;
  share.seed = options_.seed;
  share.shuffle = options_.shuffle;
  share.shuffle_buffer = options_.shuffle_buffer;
  share.rank = options_.rank;
  share.world_size = std::max(options_.world_size, 1);
  share.worker = worker;
  share.num_workers = std::max(num_workers_, 1);
  share.pass = stream_pass_;
  share.drop_last = options_.drop_last;
  return share;
}

int64_t DataLoader::StreamEpochBatches(int64_t epoch, int* idle_workers) const {
  int64_t batches = 0;
  *idle_workers = 0;
  for (int w = 0; w < std::max(num_workers_, 1); ++w) {
    const std::vector<int64_t> shards = ShardsOf(dataset_->num_shards(), ShareOf(epoch, w));
    *idle_workers += shards.empty() ? 1 : 0;
    batches += StreamBatches(*dataset_, shards, options_.knobs.batch_size, options_.drop_last);
  }
  return batches;
}

// torch's _try_put_index for an IterableDataset: the next worker in turn
// whose share is not read yet, or -1 when none is left.
int DataLoader::NextActiveWorker() {
  for (int i = 0; i < num_workers_; ++i) {
    const int w = (next_worker_ + i) % num_workers_;
    if (worker_active_[static_cast<size_t>(w)]) {
      next_worker_ = (w + 1) % num_workers_;
      return w;
    }
  }
  return -1;
}

void DataLoader::DispatchStreamed(int64_t limit) {
  while (next_to_dispatch_ - next_to_return_ < limit && !free_slots_.empty()) {
    const int worker = NextActiveWorker();
    if (worker < 0) return;
    BatchTask task;
    task.batch_index = next_to_dispatch_;
    task.slot = free_slots_.back();
    task.streamed = true;
    task.batch_size = options_.knobs.batch_size;
    task.share = ShareOf(epoch_, worker);
    free_slots_.pop_back();
    pool_->Submit(worker, task);
    ++next_to_dispatch_;
  }
}

std::optional<BatchView> DataLoader::NextStreamed() {
  if (num_workers_ == 0) return ReadStreamInline();
  while (true) {
    DispatchStreamed(max_outstanding_);
    if (next_to_return_ == next_to_dispatch_) return std::nullopt;  // every worker's share is read
    const BatchDone done = AwaitTask(next_to_return_++);
    if (done.samples == 0) {
      // The worker's share is read: its slot comes back empty, and it gets no
      // more tasks (tasks already sent to it come back empty too).
      worker_active_[static_cast<size_t>(done.worker)] = 0;
      free_slots_.push_back(done.slot);
      continue;
    }
    held_slot_ = done.slot;
    const auto slot = arena_.slot(done.slot);
    const auto indices = std::span<int64_t>(slot_indices_[static_cast<size_t>(done.slot)])
                             .first(static_cast<size_t>(done.samples));
    ReadStreamIndices(slot, dataset_->max_sample_bytes(), options_.knobs.batch_size, indices);
    return SlotView(done, indices);
  }
}

std::optional<BatchView> DataLoader::ReadStreamInline() {
  const int64_t stride = dataset_->max_sample_bytes();
  const auto slot = arena_.slot(0);
  const int64_t batch_start = trace_ ? TraceNowNs() : 0;
  WorkerStream::Fill fill;
  try {
    fill = inline_stream_->FillBatch(ShareOf(epoch_, 0), slot, stride, options_.knobs.batch_size);
  } catch (const std::exception& e) {
    throw LoaderError("batch " + std::to_string(batches_returned_) + " of the stream: " + e.what());
  }
  if (fill.samples == 0) return std::nullopt;
  const auto indices = std::span<int64_t>(slot_indices_[0]).first(static_cast<size_t>(fill.samples));
  ReadStreamIndices(slot, stride, options_.knobs.batch_size, indices);
  held_slot_ = -1;  // slot 0 is reused in place
  if (trace_) {
    trace_->Record(kMainTrack, TraceKind::kBatch, batch_start, TraceNowNs(), batches_returned_, owner_pid_, owner_tid_);
  }
  const BatchView view{epoch_, batches_returned_, indices,
                       std::span<const std::byte>(slot.data(), indices.size() * static_cast<size_t>(stride)), stride,
                       fill.bytes, false};
  return options_.knobs.pin_memory ? PinInline(view) : view;
}

BatchView DataLoader::ReadInline(int64_t batch_index) {
  const auto indices = plan_.FillBatch(batch_index, slot_indices_[0]);
  const int64_t stride = dataset_->max_sample_bytes();
  const auto slot = arena_.slot(0);
  const int64_t batch_start = trace_ ? TraceNowNs() : 0;
  int64_t payload = 0;
  try {
    payload = ReadBatchSamples(*dataset_, indices, slot, stride, options_.knobs.fetch_concurrency, trace_, kMainTrack,
                               owner_pid_, owner_tid_);
  } catch (const std::exception& e) {
    throw LoaderError("batch " + std::to_string(batch_index) + " " + e.what());
  }
  held_slot_ = -1;  // slot 0 is reused in place: nothing to release
  if (trace_) trace_->Record(kMainTrack, TraceKind::kBatch, batch_start, TraceNowNs(), batch_index, owner_pid_, owner_tid_);
  const BatchView view{epoch_, batch_index, indices,
                       std::span<const std::byte>(slot.data(), indices.size() * static_cast<size_t>(stride)), stride,
                       payload, false};
  return options_.knobs.pin_memory ? PinInline(view) : view;
}

BatchView DataLoader::Collect(int64_t batch_index) {
  const BatchDone r = AwaitTask(batch_index);
  held_slot_ = r.slot;
  // Filled at dispatch into the slot's own buffer, which nobody rewrites until
  // the slot is free again.
  const auto indices = std::span<const int64_t>(slot_indices_[static_cast<size_t>(r.slot)])
                           .first(static_cast<size_t>(plan_.batch_length(batch_index)));
  return SlotView(r, indices);
}

// The batch of a finished task, in its slot (or its slot's pinned copy).
BatchView DataLoader::SlotView(const BatchDone& r, std::span<const int64_t> indices) {
  const int64_t stride = dataset_->max_sample_bytes();
  const bool pinned = options_.knobs.pin_memory;
  const std::byte* data = pinned ? pinned_[static_cast<size_t>(r.slot)].data() : arena_.slot(r.slot).data();
  return BatchView{epoch_, batches_returned_, indices,
                   std::span<const std::byte>(data, indices.size() * static_cast<size_t>(stride)), stride, r.bytes,
                   pinned && pinned_[static_cast<size_t>(r.slot)].pinned()};
}

// Waits for task `batch_index` (tasks finish in any order; the others wait
// in the reorder buffer) and takes it out of the buffer.
BatchDone DataLoader::AwaitTask(int64_t batch_index) {
  Ready& want = reorder_[static_cast<size_t>(batch_index) % reorder_.size()];
  const bool has_timeout = options_.timeout_s > 0;
  const auto deadline = has_timeout ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                         std::chrono::duration<double>(options_.timeout_s))
                                    : Clock::time_point::max();
  while (!want.done) {
    BatchDone done;
    if (!NextDone(&done, deadline)) {
      StopWorkers();
      throw LoaderError("batch " + std::to_string(batch_index) + " of epoch " + std::to_string(epoch_) +
                        " timed out after " + std::to_string(options_.timeout_s) +
                        " s (loader.timeout_s); a worker may hang");
    }
    stats_.worker_busy_s += done.busy_s;
    if (!done.error.empty()) {
      StopWorkers();
      throw LoaderError(done.error);
    }
    reorder_[static_cast<size_t>(done.batch_index) % reorder_.size()] = Ready{true, std::move(done)};
  }
  BatchDone result = std::move(want.result);
  want = Ready{};
  return result;
}

BatchView DataLoader::PinInline(BatchView view) {
  const auto start = Clock::now();
  device::HostBuffer& dst = pinned_[static_cast<size_t>(view.index % 2)];
  std::memcpy(dst.data(), view.data.data(), view.data.size());
  view.data = std::span<const std::byte>(dst.data(), view.data.size());
  view.pinned = dst.pinned();
  stats_.pin_s += SecondsSince(start);
  if (trace_) trace_->Record(kMainTrack, TraceKind::kPin, TraceNs(start), TraceNowNs(), view.index, owner_pid_, owner_tid_);
  return view;
}

}  // namespace feedtune::loader
