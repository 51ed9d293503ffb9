// Streaming datasets: how the shards of a Dataset with num_shards() > 0 are
// shared out and read, as torch's IterableDataset with webdataset's
// split_by_node and split_by_worker read them.
//
//   - The epoch's shard order is the shards in order, or, with shuffle, a
//     permutation keyed by (seed, epoch) (loader/sampler.h), the same in
//     every rank and worker.
//   - Rank r of R takes positions r, r + R, ... of that order; worker w of W
//     of the rank takes positions w, w + W, ... of the rank's list. So the
//     shares are disjoint and cover every shard; a worker whose list is
//     empty reads nothing (more workers x ranks than shards leaves some idle).
//   - A worker reads its shards front to back. With shuffle and a buffer of B
//     samples, it first fills the buffer, then for every further sample hands
//     out a random one of the buffer and puts the new one in its place, then
//     drains the rest in random order (webdataset's shuffle(B)). The buffer
//     changes the order, never the content, and holds B samples in the
//     worker's memory: workers x B x sample bytes in all.
//
// One SampleStream per worker per epoch; used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "loader/dataset.h"

namespace feedtune::loader {

struct StreamShare {
  int64_t epoch = 0;
  uint64_t seed = 0;
  bool shuffle = false;
  int64_t shuffle_buffer = 0;  // samples; 0 or 1: no buffer (shards in order)
  int rank = 0;
  int world_size = 1;
  int worker = 0;
  int num_workers = 1;  // 1 when the consumer reads (num_workers == 0)
  // A new value starts a new pass over the share (the loader counts its
  // StartEpoch calls), so a persistent worker knows to reopen its stream.
  int64_t pass = 0;
  // A worker's short last batch is dropped, as torch's iterable fetcher
  // drops it with drop_last=True.
  bool drop_last = false;
};

// The shards `share` reads, in reading order. Throws std::invalid_argument
// for a rank or worker out of range.
std::vector<int64_t> ShardsOf(int64_t num_shards, const StreamShare& share);

// The batches a reader of `shards` (ShardsOf) yields: their samples cut into
// batches of `batch_size`, the short last one dropped when `drop_last`.
int64_t StreamBatches(const Dataset& dataset, const std::vector<int64_t>& shards, int batch_size, bool drop_last);

class SampleStream {
 public:
  SampleStream(const Dataset& dataset, const StreamShare& share);

  // Writes the share's next sample into `out` (at least max_sample_bytes),
  // its dataset index into *index and its size into *bytes; false when the
  // share is read. Throws what the shard reader throws.
  bool Next(std::span<std::byte> out, int64_t* index, int64_t* bytes);

  // Samples the buffer holds now (for tests and memory accounting).
  size_t buffered() const { return buffer_.size(); }

 private:
  struct Sample {
    int64_t index = 0;
    std::vector<std::byte> bytes;
  };

  bool ReadFromShards(Sample* sample);  // the next sample in shard order
  void Emit(Sample& sample, std::span<std::byte> out, int64_t* index, int64_t* bytes) const;

  const Dataset& dataset_;
  const std::vector<int64_t> shards_;
  const size_t buffer_size_;
  size_t next_shard_ = 0;
  std::unique_ptr<ShardReader> reader_;
  std::vector<Sample> buffer_;
  Sample incoming_;
  uint64_t rng_ = 0;
};

// One worker's stream across tasks: the worker's half of a stream task.
// A batch slot of a streaming loader holds batch_size samples at `stride`,
// then the batch's sample indices (int64, unaligned), which the consumer
// reads back (StreamSlotBytes sizes the slot).
class WorkerStream {
 public:
  explicit WorkerStream(const Dataset& dataset) : dataset_(dataset) {}

  struct Fill {
    int64_t samples = 0;  // 0: the share is read (torch's _IterableDatasetStopIteration)
    int64_t bytes = 0;
  };
  // Reads up to `count` samples of `share`'s stream into `slot`, opening a
  // new stream when share.pass differs from the last task's.
  Fill FillBatch(const StreamShare& share, std::span<std::byte> slot, int64_t stride, int64_t count);

 private:
  const Dataset& dataset_;
  std::unique_ptr<SampleStream> stream_;
  int64_t pass_ = -1;
};

// Bytes of a streaming loader's slot: the samples, then their indices.
int64_t StreamSlotBytes(int64_t batch_size, int64_t stride);
// The indices a stream task wrote after the samples of `slot`.
void ReadStreamIndices(std::span<const std::byte> slot, int64_t stride, int64_t batch_size, std::span<int64_t> out);

}  // namespace feedtune::loader
