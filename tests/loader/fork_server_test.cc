// The fork server (loader/fork_server.h): workers come from a process forked
// before the caller's threads, one server serves many loaders, and its death
// is an error, never a hang or a leak.
#include "loader/fork_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "loader/data_loader.h"
#include "tests/common/process_tree.h"

namespace feedtune::loader {
namespace {

using testing_util::CountWorkerProcesses;

// Each sample holds the pid of the process that read it and that process's
// parent; reading one takes `read_us`.
class WhoReadsDataset final : public Dataset {
 public:
  explicit WhoReadsDataset(int read_us = 0) : read_us_(read_us) {}
  int64_t size() const override { return 64; }
  int64_t max_sample_bytes() const override { return 16; }
  int64_t Read(int64_t /*index*/, std::span<std::byte> out) const override {
    if (read_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(read_us_));
    const int64_t ids[2] = {getpid(), getppid()};
    std::memcpy(out.data(), ids, sizeof ids);
    return sizeof ids;
  }

 private:
  int read_us_;
};

LoaderOptions Options(int workers, int prefetch = 2) {
  LoaderOptions options;
  options.knobs.batch_size = 4;
  options.knobs.num_workers = workers;
  options.knobs.prefetch_factor = prefetch;
  options.knobs.persistent_workers = false;
  options.shuffle = false;
  return options;
}

TEST(ForkServer, WorkersAreChildrenOfTheServerNotOfTheLoader) {
  const auto dataset = std::make_shared<WhoReadsDataset>();
  const auto server = std::make_shared<ForkServer>(dataset);
  ASSERT_GT(server->pid(), 0);
  DataLoader loader(dataset, Options(3), nullptr, server);
  loader.StartEpoch(0);
  int64_t batches = 0;
  while (auto batch = loader.Next()) {
    for (size_t i = 0; i < batch->sample_indices.size(); ++i) {
      int64_t ids[2];
      std::memcpy(ids, batch->data.data() + i * static_cast<size_t>(batch->stride), sizeof ids);
      EXPECT_NE(ids[0], getpid());
      EXPECT_EQ(ids[1], server->pid()) << "sample " << batch->sample_indices[i] << " read by pid " << ids[0];
    }
    ++batches;
  }
  EXPECT_EQ(batches, 16);
  EXPECT_EQ(CountWorkerProcesses(), 0) << "non-persistent workers end with the epoch";
}

// The reason for the server: a lock held by one of this process's threads when
// the workers start (as the CUDA runtime's or the pin stage's threads may hold
// one) is free in the workers, because they are copies of the server, made
// before that thread existed. A worker forked from this process would copy the
// lock held and wait for it forever.
class LockingDataset final : public Dataset {
 public:
  explicit LockingDataset(std::mutex* mu) : mu_(mu) {}
  int64_t size() const override { return 16; }
  int64_t max_sample_bytes() const override { return 8; }
  void InitWorker(int /*worker_id*/) const override { std::lock_guard lock(*mu_); }
  int64_t Read(int64_t index, std::span<std::byte> out) const override {
    std::memcpy(out.data(), &index, sizeof index);
    return sizeof index;
  }

 private:
  std::mutex* mu_;
};

TEST(ForkServer, WorkersDoNotInheritLocksHeldByLaterThreads) {
  static std::mutex mu;  // outlives the workers' copies of the dataset
  const auto dataset = std::make_shared<LockingDataset>(&mu);
  const auto server = std::make_shared<ForkServer>(dataset);

  std::mutex state_mu;
  std::condition_variable cv;
  bool held = false, release = false;
  std::thread holder([&] {
    std::lock_guard hold(mu);
    std::unique_lock lock(state_mu);
    held = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  {
    std::unique_lock lock(state_mu);
    cv.wait(lock, [&] { return held; });
  }
  int64_t batches = 0;
  {
    LoaderOptions options = Options(2);
    options.timeout_s = 10;
    DataLoader loader(dataset, options, nullptr, server);
    loader.StartEpoch(0);
    while (loader.Next()) ++batches;
  }
  {
    std::lock_guard lock(state_mu);
    release = true;
  }
  cv.notify_all();
  holder.join();
  EXPECT_EQ(batches, 4);
}

// One server for many loaders, as a sweep runs many trials: different slot
// counts and sizes, two loaders alive at once, persistent and not.
TEST(ForkServer, OneServerServesManyLoaders) {
  const auto dataset = std::make_shared<WhoReadsDataset>();
  const auto server = std::make_shared<ForkServer>(dataset);
  for (int prefetch = 1; prefetch <= 4; prefetch *= 2) {
    LoaderOptions a_options = Options(2, prefetch);
    a_options.knobs.persistent_workers = true;
    DataLoader a(dataset, a_options, nullptr, server);
    DataLoader b(dataset, Options(1, prefetch), nullptr, server);
    for (int epoch = 0; epoch < 2; ++epoch) {
      a.StartEpoch(epoch);
      b.StartEpoch(epoch);
      int64_t from_a = 0, from_b = 0;
      while (true) {
        auto x = a.Next();
        if (x) ++from_a;
        auto y = b.Next();
        if (y) ++from_b;
        if (!x && !y) break;
      }
      EXPECT_EQ(from_a, 16);
      EXPECT_EQ(from_b, 16);
    }
    EXPECT_EQ(CountWorkerProcesses(), 2) << "a's persistent workers";
  }
  EXPECT_EQ(CountWorkerProcesses(), 0);
}

// The server gives each worker the slot arena's memfd and keeps no copy: when
// the loader goes, so does the shared memory.
TEST(ForkServer, KeepsNoSlotMemory) {
  const auto dataset = std::make_shared<WhoReadsDataset>();
  const auto server = std::make_shared<ForkServer>(dataset);
  auto count_memfds = [](pid_t pid) {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink(entry.path(), ec);
      if (!ec && target.string().find("feedtune-slots") != std::string::npos) ++count;
    }
    return count;
  };
  {
    LoaderOptions options = Options(2);
    options.knobs.persistent_workers = true;
    DataLoader loader(dataset, options, nullptr, server);
    loader.StartEpoch(0);
    ASSERT_TRUE(loader.Next());
    EXPECT_EQ(count_memfds(server->pid()), 0);
    EXPECT_EQ(count_memfds(getpid()), 1) << "the loader's own arena";
  }
  EXPECT_EQ(count_memfds(getpid()), 0);
  EXPECT_EQ(count_memfds(server->pid()), 0);
}

TEST(ForkServer, ItsDeathIsAnErrorNotAHang) {
  // 40 ms a batch: most of the epoch's 16 batches are still to come at the kill.
  const auto dataset = std::make_shared<WhoReadsDataset>(/*read_us=*/10000);
  const auto server = std::make_shared<ForkServer>(dataset);
  LoaderOptions options = Options(2);
  options.knobs.persistent_workers = true;
  DataLoader loader(dataset, options, nullptr, server);
  loader.StartEpoch(0);
  ASSERT_TRUE(loader.Next());
  ASSERT_EQ(kill(server->pid(), SIGKILL), 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    while (loader.Next()) {
    }
    FAIL() << "the epoch ended without an error";
  } catch (const LoaderError& e) {
    EXPECT_NE(std::string(e.what()).find("ended with the fork server, which died"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  loader.Shutdown();
  try {
    loader.StartEpoch(1);
    FAIL() << "workers started without a server";
  } catch (const LoaderError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot start worker 0: the fork server (pid " + std::to_string(server->pid()) + ") is gone");
  }
}

TEST(ForkServer, RefusesALoaderOfAnotherDataset) {
  const auto server = std::make_shared<ForkServer>(std::make_shared<WhoReadsDataset>());
  EXPECT_THROW(DataLoader(std::make_shared<WhoReadsDataset>(), Options(1), nullptr, server), std::invalid_argument);
  // Thread mode and num_workers 0 start no process and need no server.
  EXPECT_NO_THROW(DataLoader(std::make_shared<WhoReadsDataset>(), Options(0), nullptr, server));
}

}  // namespace
}  // namespace feedtune::loader
