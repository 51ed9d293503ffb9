#include "loader/data_loader.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <dirent.h>
#include <set>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "loader/device/host_buffer.h"
#include "tests/common/process_tree.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::loader {
namespace {

using testing_util::CountWorkerProcesses;

// Writes the sample index into the first 8 bytes of each sample; can fail on one index.
class IndexDataset final : public Dataset {
 public:
  IndexDataset(int64_t n, int64_t bytes, int64_t fail_at = -1) : n_(n), bytes_(bytes), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  int64_t max_sample_bytes() const override { return bytes_; }
  int64_t Read(int64_t index, std::span<std::byte> out) const override {
    if (index == fail_at_) throw std::runtime_error("cannot decode");
    std::memset(out.data(), 0, static_cast<size_t>(bytes_));
    std::memcpy(out.data(), &index, sizeof index);
    return bytes_;
  }

 private:
  int64_t n_, bytes_, fail_at_;
};

PinnedAllocFn HostSimPinned() {
  return [](size_t bytes) {
    bool locked = false;
    return device::AllocLockedHostSim(bytes, &locked, nullptr);
  };
}

struct Case {
  WorkerMode mode;
  int workers;
  int prefetch;
  bool persistent;
  bool pin;
};

std::string Name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(WorkerModeName(c.mode)) + "_w" + std::to_string(c.workers) + "_pf" + std::to_string(c.prefetch) +
         (c.persistent ? "_persistent" : "") + (c.pin ? "_pin" : "");
}

class ExactlyOnce : public testing::TestWithParam<Case> {};

// Every sample exactly once per epoch, batches in sampler order, several epochs.
TEST_P(ExactlyOnce, EverySampleOnceInSamplerOrder) {
  const Case c = GetParam();
  LoaderOptions options;
  options.knobs.batch_size = 7;
  options.knobs.num_workers = c.workers;
  options.knobs.prefetch_factor = c.prefetch;
  options.knobs.persistent_workers = c.persistent;
  options.knobs.pin_memory = c.pin;
  options.worker_mode = c.mode;
  options.shuffle = true;
  options.drop_last = false;
  options.seed = 99;
  auto dataset = std::make_shared<IndexDataset>(100, 24);
  DataLoader loader(dataset, options, HostSimPinned());
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.StartEpoch(epoch);
    const BatchPlan plan(EpochSampler(100, true, 99, epoch), 7, false);
    std::multiset<int64_t> seen;
    int64_t k = 0;
    while (auto batch = loader.Next()) {
      ASSERT_EQ(batch->index, k);
      ASSERT_EQ(batch->pinned, c.pin);
      const auto want = plan.batch(k);
      ASSERT_EQ(batch->sample_indices.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        int64_t got = -1;
        std::memcpy(&got, batch->data.data() + i * static_cast<size_t>(batch->stride), sizeof got);
        EXPECT_EQ(got, want[i]) << "epoch " << epoch << " batch " << k << " position " << i;
        seen.insert(got);
      }
      ++k;
    }
    EXPECT_EQ(k, 15);  // ceil(100 / 7)
    EXPECT_EQ(seen.size(), 100u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 100u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ExactlyOnce,
    testing::Values(Case{WorkerMode::kThread, 0, 2, false, false}, Case{WorkerMode::kThread, 1, 1, false, false},
                    Case{WorkerMode::kThread, 1, 4, true, false}, Case{WorkerMode::kThread, 3, 1, false, true},
                    Case{WorkerMode::kThread, 3, 4, true, false}, Case{WorkerMode::kThread, 3, 8, false, false},
                    Case{WorkerMode::kProcess, 1, 1, false, false}, Case{WorkerMode::kProcess, 1, 4, true, true},
                    Case{WorkerMode::kProcess, 3, 1, true, false}, Case{WorkerMode::kProcess, 3, 4, false, false},
                    Case{WorkerMode::kProcess, 3, 8, true, false}),
    Name);

// A dataset that reads concurrently (an object store's): each sample holds
// its index and how many requests in flight read it, so a batch says which
// path the loader took.
class ConcurrentDataset final : public Dataset {
 public:
  int64_t size() const override { return 40; }
  int64_t max_sample_bytes() const override { return 16; }
  int64_t Read(int64_t index, std::span<std::byte> out) const override {
    const int64_t fields[2] = {index, 1};
    std::memcpy(out.data(), fields, sizeof fields);
    return 16;
  }
  bool reads_concurrently() const override { return true; }
  void ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride, int concurrency,
                std::span<int64_t> bytes) const override {
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t fields[2] = {indices[i], concurrency};
      std::memcpy(slot.data() + i * static_cast<size_t>(stride), fields, sizeof fields);
      bytes[i] = 16;
    }
  }
};

// loader.fetch_concurrency reaches a dataset that reads concurrently in every
// worker mode (and without workers), with each batch's samples in order; at
// 1, or for a batch of one, the samples are read one by one.
TEST(DataLoader, FetchConcurrencyReachesADatasetThatReadsConcurrently) {
  for (const WorkerMode mode : {WorkerMode::kProcess, WorkerMode::kThread}) {
    for (const int workers : {0, 2}) {
      for (const int fetch : {1, 4}) {
        LoaderOptions options;
        options.knobs.batch_size = 8;
        options.knobs.num_workers = workers;
        options.knobs.fetch_concurrency = fetch;
        options.worker_mode = mode;
        options.shuffle = false;
        DataLoader loader(std::make_shared<ConcurrentDataset>(), options, HostSimPinned());
        loader.StartEpoch(0);
        int64_t expected = 0;
        while (auto batch = loader.Next()) {
          for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
            int64_t fields[2] = {-1, -1};
            std::memcpy(fields, batch->data.data() + i * static_cast<size_t>(batch->stride), sizeof fields);
            EXPECT_EQ(fields[0], expected++);
            EXPECT_EQ(fields[1], fetch) << WorkerModeName(mode) << " with " << workers << " workers";
          }
        }
        EXPECT_EQ(expected, 40);
      }
    }
  }
}

// Ranks of a data-parallel job read torch's DistributedSampler shares: each
// rank's loader hands out its share in order, every sample lands in some
// rank, and only the padding (the order's head) is read twice.
TEST(DataLoader, RankSharesCoverTheEpochWithDistributedSamplerPadding) {
  constexpr int64_t n = 100;
  constexpr int ws = 3;  // 100 = 3 x 33 + 1: padded to 102
  auto dataset = std::make_shared<IndexDataset>(n, 16);
  for (WorkerMode mode : {WorkerMode::kThread, WorkerMode::kProcess}) {
    std::vector<int> reads(n, 0);
    for (int rank = 0; rank < ws; ++rank) {
      LoaderOptions options;
      options.knobs.batch_size = 5;
      options.knobs.num_workers = 2;
      options.knobs.prefetch_factor = 2;
      options.worker_mode = mode;
      options.shuffle = true;
      options.seed = 4;
      options.rank = rank;
      options.world_size = ws;
      options.drop_last = false;  // 34 = 6 x 5 + 4: the short batch counts
      DataLoader loader(dataset, options, HostSimPinned());
      loader.StartEpoch(1);
      const EpochSampler want(n, true, 4, 1, rank, ws);
      int64_t position = 0;
      while (auto batch = loader.Next()) {
        for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
          int64_t got = -1;
          std::memcpy(&got, batch->data.data() + i * static_cast<size_t>(batch->stride), sizeof got);
          ASSERT_EQ(got, batch->sample_indices[i]);
          ASSERT_EQ(got, want.at(position)) << "rank " << rank << " position " << position;
          ++position;
          ++reads[static_cast<size_t>(got)];
        }
      }
      EXPECT_EQ(position, 34);
    }
    const EpochPermutation perm(n, true, 4, 1);
    for (int64_t v = 0; v < n; ++v) {
      EXPECT_EQ(reads[static_cast<size_t>(v)], v == perm.at(0) || v == perm.at(1) ? 2 : 1) << "sample " << v;
    }
  }
}

// A billion-sample epoch starts at once: the order is computed per batch, not
// materialised (1e8 used to take 2.7 s and 779 MiB before batch 0).
TEST(DataLoader, ABillionSampleEpochStartsAtOnce) {
  constexpr int64_t n = 1'000'000'000;
  LoaderOptions options;
  options.knobs.batch_size = 64;
  options.knobs.num_workers = 0;
  options.shuffle = true;
  options.seed = 8;
  DataLoader loader(std::make_shared<IndexDataset>(n, 16), options, HostSimPinned());
  loader.StartEpoch(0);
  const BatchPlan plan(EpochSampler(n, true, 8, 0), 64, false);
  for (int64_t k = 0; k < 3; ++k) {
    const auto batch = loader.Next();
    ASSERT_TRUE(batch.has_value());
    const auto want = plan.batch(k);
    EXPECT_EQ(std::vector<int64_t>(batch->sample_indices.begin(), batch->sample_indices.end()), want);
  }
  // Generous for a loaded, sanitised box; it takes microseconds.
  EXPECT_LT(loader.stats().time_to_first_batch_s, 0.5);
}

TEST(DataLoader, SyntheticContentIsByteExactThroughProcessWorkersAndPinning) {
  workloads::SyntheticOptions so;
  so.samples = 40;
  so.sample_bytes = 1001;  // not a multiple of 8
  so.cpu_us_per_sample = 0;
  so.seed = 5;
  LoaderOptions options;
  options.knobs.batch_size = 8;
  options.knobs.num_workers = 2;
  options.knobs.pin_memory = true;
  options.worker_mode = WorkerMode::kProcess;
  DataLoader loader(std::make_shared<workloads::SyntheticDataset>(so), options, HostSimPinned());
  loader.StartEpoch(0);
  int batches = 0;
  while (auto batch = loader.Next()) {
    ++batches;
    EXPECT_EQ(batch->payload_bytes, 8 * 1001);
    for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
      for (int64_t off = 0; off < 1001; ++off) {
        ASSERT_EQ(batch->data[i * static_cast<size_t>(batch->stride) + static_cast<size_t>(off)],
                  workloads::SyntheticDataset::ExpectedByte(5, batch->sample_indices[i], off));
      }
    }
  }
  EXPECT_EQ(batches, 5);
}

TEST(DataLoader, OutstandingBatchesNeverExceedPrefetchTimesWorkers) {
  LoaderOptions options;
  options.knobs.batch_size = 1;
  options.knobs.num_workers = 2;
  options.knobs.prefetch_factor = 3;
  options.worker_mode = WorkerMode::kThread;
  DataLoader loader(std::make_shared<IndexDataset>(50, 8), options);
  // Slots are the hard bound: prefetch_factor x num_workers + the held batch.
  loader.StartEpoch(0);
  int n = 0;
  while (loader.Next()) ++n;
  EXPECT_EQ(n, 50);
}

class WorkerErrors : public testing::TestWithParam<WorkerMode> {};

TEST_P(WorkerErrors, AnExceptionNamesTheBatchAndSample) {
  LoaderOptions options;
  options.knobs.batch_size = 4;
  options.knobs.num_workers = 2;
  options.shuffle = false;
  options.worker_mode = GetParam();
  DataLoader loader(std::make_shared<IndexDataset>(40, 16, /*fail_at=*/13), options);
  loader.StartEpoch(0);
  try {
    while (loader.Next()) {
    }
    FAIL() << "no error";
  } catch (const LoaderError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("failed on batch 3 (sample 13): cannot decode"), std::string::npos) << what;
  }
  loader.Shutdown();
  EXPECT_EQ(CountWorkerProcesses(), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, WorkerErrors, testing::Values(WorkerMode::kThread, WorkerMode::kProcess),
                         [](const auto& p) { return std::string(WorkerModeName(p.param)); });

// A dataset whose Read kills the worker process on one sample.
class CrashingDataset final : public Dataset {
 public:
  int64_t size() const override { return 32; }
  int64_t max_sample_bytes() const override { return 8; }
  int64_t Read(int64_t index, std::span<std::byte> /*out*/) const override {
    if (index == 9) _exit(7);
    if (index == 17) raise(SIGSEGV);
    return 8;
  }
};

TEST(ProcessWorkers, AWorkerThatExitsIsReportedWithPidAndCode) {
  LoaderOptions options;
  options.knobs.batch_size = 2;
  options.knobs.num_workers = 2;
  options.shuffle = false;
  DataLoader loader(std::make_shared<CrashingDataset>(), options);
  loader.StartEpoch(0);
  try {
    while (loader.Next()) {
    }
    FAIL() << "no error";
  } catch (const LoaderError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("worker 0 (pid "), std::string::npos) << what;
    EXPECT_NE(what.find("exited with code 7 while loading batch 4"), std::string::npos) << what;
  }
  loader.Shutdown();
  EXPECT_EQ(CountWorkerProcesses(), 0);
}

TEST(ProcessWorkers, ASignalIsReportedByName) {
  LoaderOptions options;
  options.knobs.batch_size = 2;
  options.knobs.num_workers = 1;
  options.shuffle = false;
  options.seed = 0;
  class Segfaulting final : public Dataset {
   public:
    int64_t size() const override { return 20; }
    int64_t max_sample_bytes() const override { return 8; }
    int64_t Read(int64_t index, std::span<std::byte> /*out*/) const override {
      if (index == 17) {
        // Sanitizers catch SIGSEGV and exit instead; restore the default so the
        // worker dies by the signal as it would in a release build.
        std::signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
      }
      return 8;
    }
  };
  DataLoader loader(std::make_shared<Segfaulting>(), options);
  loader.StartEpoch(0);
  try {
    while (loader.Next()) {
    }
    FAIL() << "no error";
  } catch (const LoaderError& e) {
    EXPECT_NE(std::string(e.what()).find("was killed by signal 11 (SIGSEGV) while loading batch 8"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(CountWorkerProcesses(), 0);
}

TEST(DataLoader, TimeoutTurnsAHangIntoAnError) {
  class Hanging final : public Dataset {
   public:
    int64_t size() const override { return 8; }
    int64_t max_sample_bytes() const override { return 8; }
    int64_t Read(int64_t index, std::span<std::byte> /*out*/) const override {
      if (index == 5) sleep(30);
      return 8;
    }
  };
  LoaderOptions options;
  options.knobs.batch_size = 1;
  options.knobs.num_workers = 1;
  options.shuffle = false;
  options.timeout_s = 0.5;
  DataLoader loader(std::make_shared<Hanging>(), options);
  loader.StartEpoch(0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(
      {
        while (loader.Next()) {
        }
      },
      LoaderError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(CountWorkerProcesses(), 0);
}

TEST(DataLoader, NonPersistentWorkersRestartEachEpoch) {
  LoaderOptions options;
  options.knobs.batch_size = 4;
  options.knobs.num_workers = 2;
  options.knobs.persistent_workers = false;
  DataLoader loader(std::make_shared<IndexDataset>(16, 8), options);
  for (int e = 0; e < 3; ++e) {
    loader.StartEpoch(e);
    while (loader.Next()) {
    }
    EXPECT_EQ(CountWorkerProcesses(), 0) << "workers must end with the epoch";
  }
  EXPECT_EQ(loader.stats().worker_starts, 3);

  options.knobs.persistent_workers = true;
  DataLoader persistent(std::make_shared<IndexDataset>(16, 8), options);
  for (int e = 0; e < 3; ++e) {
    persistent.StartEpoch(e);
    while (persistent.Next()) {
    }
  }
  EXPECT_EQ(persistent.stats().worker_starts, 1);
  EXPECT_EQ(CountWorkerProcesses(), 2);
  persistent.Shutdown();
  EXPECT_EQ(CountWorkerProcesses(), 0);
}

}  // namespace
}  // namespace feedtune::loader
