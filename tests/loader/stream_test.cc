// Streaming datasets (loader/stream.h): shard shares, the shuffle buffer, and
// the DataLoader's IterableDataset semantics in both worker modes.
#include "loader/stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/data_loader.h"
#include "loader/device/host_buffer.h"
#include "tests/common/iota.h"

namespace feedtune::loader {
namespace {

constexpr int64_t kSampleBytes = 24;

// Shard s holds samples_per_shard[s] samples, numbered through the shards;
// a sample's bytes are its number, then its shard, then a tag.
class ShardedDataset final : public Dataset {
 public:
  explicit ShardedDataset(std::vector<int64_t> samples_per_shard, int64_t fail_at = -1)
      : counts_(std::move(samples_per_shard)), fail_at_(fail_at) {
    int64_t first = 0;
    for (const int64_t c : counts_) {
      firsts_.push_back(first);
      first += c;
    }
    total_ = first;
  }
  int64_t size() const override { return total_; }
  int64_t max_sample_bytes() const override { return kSampleBytes; }
  int64_t Read(int64_t, std::span<std::byte>) const override { throw std::logic_error("a stream has no Read"); }
  int64_t num_shards() const override { return static_cast<int64_t>(counts_.size()); }
  int64_t shard_samples(int64_t shard) const override { return counts_[static_cast<size_t>(shard)]; }

  std::unique_ptr<ShardReader> OpenShard(int64_t shard) const override {
    class Reader final : public ShardReader {
     public:
      Reader(int64_t shard, int64_t first, int64_t count, int64_t fail_at)
          : shard_(shard), next_(first), end_(first + count), fail_at_(fail_at) {}
      bool Next(std::vector<std::byte>* sample, int64_t* index) override {
        if (next_ == end_) return false;
        if (next_ == fail_at_) throw std::runtime_error("shard " + std::to_string(shard_) + ": bad record");
        sample->assign(kSampleBytes, std::byte{0x5a});
        std::memcpy(sample->data(), &next_, sizeof next_);
        std::memcpy(sample->data() + 8, &shard_, sizeof shard_);
        *index = next_++;
        return true;
      }

     private:
      int64_t shard_, next_, end_, fail_at_;
    };
    const auto s = static_cast<size_t>(shard);
    return std::make_unique<Reader>(shard, firsts_[s], counts_[s], fail_at_);
  }

 private:
  std::vector<int64_t> counts_, firsts_;
  int64_t total_ = 0;
  int64_t fail_at_;
};

std::vector<int64_t> Even(int shards, int64_t per_shard) { return std::vector<int64_t>(static_cast<size_t>(shards), per_shard); }

LoaderOptions Options(int workers, WorkerMode mode, int batch = 4) {
  LoaderOptions o;
  o.knobs.batch_size = batch;
  o.knobs.num_workers = workers;
  o.knobs.prefetch_factor = 2;
  o.worker_mode = mode;
  o.drop_last = false;
  o.shuffle = false;
  o.timeout_s = 30;
  return o;
}

struct Epoch {
  std::vector<int64_t> order;          // sample indices, in the order the batches came
  std::vector<int64_t> batch_lengths;
};

// Reads one epoch, checking every sample's bytes against its index.
Epoch ReadEpoch(DataLoader& loader, int64_t epoch) {
  Epoch out;
  loader.StartEpoch(epoch);
  int64_t expected_index = 0;
  while (auto batch = loader.Next()) {
    EXPECT_EQ(batch->index, expected_index++);
    out.batch_lengths.push_back(static_cast<int64_t>(batch->sample_indices.size()));
    for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
      int64_t stored = -1;
      std::memcpy(&stored, batch->data.data() + i * static_cast<size_t>(batch->stride), sizeof stored);
      EXPECT_EQ(stored, batch->sample_indices[i]);
      out.order.push_back(batch->sample_indices[i]);
    }
  }
  EXPECT_EQ(static_cast<int64_t>(out.batch_lengths.size()), loader.batches_per_epoch());
  return out;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

using testing_util::Iota;

TEST(ShardsOf, SplitsByRankThenByWorker) {
  StreamShare share;
  share.world_size = 2;
  share.num_workers = 2;
  // Order 0..7; rank 0 gets 0,2,4,6 and its worker 1 every other of those.
  share.rank = 0;
  share.worker = 1;
  EXPECT_EQ(ShardsOf(8, share), (std::vector<int64_t>{2, 6}));
  share.rank = 1;
  share.worker = 0;
  EXPECT_EQ(ShardsOf(8, share), (std::vector<int64_t>{1, 5}));
}

TEST(ShardsOf, RanksTimesWorkersSharesAreDisjointAndCoverAllShards) {
  for (const int64_t shards : {1, 5, 12, 13}) {
    for (const bool shuffle : {false, true}) {
      std::vector<int64_t> all;
      StreamShare share;
      share.shuffle = shuffle;
      share.seed = 7;
      share.epoch = 3;
      share.world_size = 3;
      share.num_workers = 2;
      for (share.rank = 0; share.rank < 3; ++share.rank) {
        for (share.worker = 0; share.worker < 2; ++share.worker) {
          const auto mine = ShardsOf(shards, share);
          all.insert(all.end(), mine.begin(), mine.end());
        }
      }
      EXPECT_EQ(Sorted(all), Iota(shards)) << shards << " shards, shuffle " << shuffle;
    }
  }
}

TEST(ShardsOf, ShuffledOrderDiffersAcrossEpochsAndRepeats) {
  StreamShare a;
  a.shuffle = true;
  a.seed = 1;
  StreamShare b = a;
  b.epoch = 1;
  EXPECT_EQ(ShardsOf(64, a), ShardsOf(64, a));
  EXPECT_NE(ShardsOf(64, a), ShardsOf(64, b));
}

TEST(ShardsOf, RejectsAShareOutOfRange) {
  StreamShare share;
  share.num_workers = 2;
  share.worker = 2;
  EXPECT_THROW(ShardsOf(4, share), std::invalid_argument);
}

TEST(SampleStream, ShuffleBufferChangesTheOrderNeverTheContent) {
  const ShardedDataset dataset(Even(4, 50));
  StreamShare share;
  share.shuffle = true;
  share.shuffle_buffer = 32;
  share.seed = 3;
  SampleStream stream(dataset, share);
  std::vector<std::byte> out(kSampleBytes);
  std::vector<int64_t> order;
  int64_t index = 0, bytes = 0;
  while (stream.Next(out, &index, &bytes)) {
    EXPECT_EQ(bytes, kSampleBytes);
    order.push_back(index);
  }
  EXPECT_EQ(Sorted(order), Iota(200));
  EXPECT_NE(order, Iota(200));
  EXPECT_EQ(stream.buffered(), 0U);
}

TEST(SampleStream, WithoutShuffleReadsShardsInOrder) {
  const ShardedDataset dataset(Even(3, 5));
  StreamShare share;
  share.shuffle_buffer = 8;  // ignored without shuffle
  SampleStream stream(dataset, share);
  std::vector<std::byte> out(kSampleBytes);
  std::vector<int64_t> order;
  int64_t index = 0, bytes = 0;
  while (stream.Next(out, &index, &bytes)) order.push_back(index);
  EXPECT_EQ(order, Iota(15));
}

struct StreamCase {
  WorkerMode mode;
  int shards;
  int workers;
};

class StreamLoader : public testing::TestWithParam<StreamCase> {};

// S > W, S = W, S < W: every sample exactly once per epoch, over two epochs
// with persistent and fresh workers.
TEST_P(StreamLoader, EverySampleExactlyOncePerEpoch) {
  const StreamCase c = GetParam();
  auto dataset = std::make_shared<ShardedDataset>(Even(c.shards, 9));  // 9: short last batches
  for (const bool persistent : {false, true}) {
    LoaderOptions o = Options(c.workers, c.mode);
    o.knobs.persistent_workers = persistent;
    o.shuffle = true;
    o.shuffle_buffer = 5;
    DataLoader loader(dataset, o);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      const Epoch e = ReadEpoch(loader, epoch);
      EXPECT_EQ(Sorted(e.order), Iota(dataset->size())) << "epoch " << epoch << " persistent " << persistent;
      // S < W: the workers without a shard are reported idle.
      EXPECT_EQ(loader.stats().idle_stream_workers, std::max(0, c.workers - c.shards));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shards, StreamLoader,
    testing::Values(StreamCase{WorkerMode::kProcess, 5, 2}, StreamCase{WorkerMode::kProcess, 3, 3},
                    StreamCase{WorkerMode::kProcess, 2, 4}, StreamCase{WorkerMode::kThread, 5, 2},
                    StreamCase{WorkerMode::kThread, 2, 4}, StreamCase{WorkerMode::kThread, 3, 0}),
    [](const testing::TestParamInfo<StreamCase>& p) {
      return std::string(WorkerModeName(p.param.mode)) + "_s" + std::to_string(p.param.shards) + "_w" +
             std::to_string(p.param.workers);
    });

// Batches come from the workers in turn, as torch's IterableDataset's do: with
// 2 workers on shards {0, 2} and {1, 3}, batches alternate between them, and
// once worker 1 (fewer samples) is done, worker 0's come one after another.
TEST(StreamLoader, BatchesComeFromWorkersInTurn) {
  auto dataset = std::make_shared<ShardedDataset>(std::vector<int64_t>{8, 4, 8, 0});
  DataLoader loader(dataset, Options(2, WorkerMode::kThread));
  const Epoch e = ReadEpoch(loader, 0);
  // Worker 0 reads shards 0 and 2 (samples 0-7, 12-19); worker 1 shards 1 and 3 (8-11).
  EXPECT_EQ(e.order, (std::vector<int64_t>{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(loader.batches_per_epoch(), 5);
}

TEST(StreamLoader, DropLastDropsEachWorkersShortBatch) {
  auto dataset = std::make_shared<ShardedDataset>(Even(2, 6));
  LoaderOptions o = Options(2, WorkerMode::kProcess);
  o.drop_last = true;
  DataLoader loader(dataset, o);
  const Epoch e = ReadEpoch(loader, 0);
  EXPECT_EQ(e.order, (std::vector<int64_t>{0, 1, 2, 3, 6, 7, 8, 9}));
}

TEST(StreamLoader, RanksTimesWorkersReadDisjointSharesThatCoverEverything) {
  auto dataset = std::make_shared<ShardedDataset>(Even(7, 3));
  std::vector<int64_t> all;
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions o = Options(2, WorkerMode::kThread);
    o.rank = rank;
    o.world_size = 2;
    o.shuffle = true;
    DataLoader loader(dataset, o);
    const Epoch e = ReadEpoch(loader, 4);
    all.insert(all.end(), e.order.begin(), e.order.end());
  }
  EXPECT_EQ(Sorted(all), Iota(21));
}

TEST(StreamLoader, AShardErrorNamesTheWorkerAndTheShard) {
  auto dataset = std::make_shared<ShardedDataset>(Even(2, 10), /*fail_at=*/13);
  DataLoader loader(dataset, Options(2, WorkerMode::kProcess));
  loader.StartEpoch(0);
  try {
    while (loader.Next()) {
    }
    FAIL() << "expected a LoaderError";
  } catch (const LoaderError& e) {
    EXPECT_NE(std::string(e.what()).find("of its stream: shard 1: bad record"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace feedtune::loader
