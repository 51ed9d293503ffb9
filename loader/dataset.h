// Dataset: what the loader reads, sample by sample (torch's map-style Dataset).
//
// Implementations must be safe to call from several threads at once (thread-mode
// workers share one instance) and from forked processes (process-mode workers
// inherit it), so Read() is const and keeps no per-call shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace feedtune::loader {

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Upper bound of any sample's size; the loader sizes its slots with it.
  virtual int64_t max_sample_bytes() const = 0;

  // Called once in each worker before its first sample (and in the consumer when
  // num_workers == 0), as torch's worker_init_fn / per-worker dataset set-up.
  virtual void InitWorker(int /*worker_id*/) const {}

  // Called by the trial runner, in the consumer process, before each
  // measurement window (a file-backed dataset evicts its files from the page
  // cache here). Returns a note for the user about what it did, or empty.
  virtual std::string BeforeRepeat() const { return {}; }

  // Called by the DataLoader, in the consumer process, when epoch `epoch`
  // starts and before any of its samples is dispatched, so that a dataset
  // whose samples depend on the epoch (random crops, as torchvision's differ
  // every epoch) can draw them from it. Process workers are forked before
  // this call: a dataset that uses the epoch keeps it in memory shared with
  // them (a MAP_SHARED page made at construction).
  virtual void SetEpoch(int64_t /*epoch*/) const {}

  // Writes sample `index` (0 <= index < size()) into `out`, whose size is
  // max_sample_bytes(); returns the number of bytes written. Throws on failure.
  virtual int64_t Read(int64_t index, std::span<std::byte> out) const = 0;
};

}  // namespace feedtune::loader
