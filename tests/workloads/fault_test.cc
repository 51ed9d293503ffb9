// Injected faults, through the real loader: in forked workers each kind does
// what it says and the loader reports it; in the main process (num_workers 0,
// thread workers) every kind is an exception, so the tool never dies.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "loader/data_loader.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::workloads {
namespace {

// Loads one epoch; returns the loader's error, or "no error".
std::string LoadError(FaultKind kind, int num_workers, loader::WorkerMode mode, double timeout_s = 0) {
  SyntheticOptions o;
  o.samples = 64;
  o.sample_bytes = 256;
  o.cpu_us_per_sample = 0;
  o.fault = {.kind = kind, .at_sample = 37};
  auto dataset = std::make_shared<SyntheticDataset>(o, CpuCalibration{});
  loader::LoaderOptions options;
  options.knobs.batch_size = 4;
  options.knobs.num_workers = num_workers;
  options.worker_mode = mode;
  options.shuffle = false;
  options.timeout_s = timeout_s;
  try {
    loader::DataLoader data_loader(dataset, options);
    data_loader.StartEpoch(0);
    while (data_loader.Next()) {
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

constexpr auto kProcess = loader::WorkerMode::kProcess;
constexpr auto kThread = loader::WorkerMode::kThread;

TEST(Fault, ThrowIsReportedWithTheSample) {
  for (int workers : {0, 2}) {
    const std::string error = LoadError(FaultKind::kThrow, workers, kProcess);
    EXPECT_NE(error.find("sample 37"), std::string::npos) << error;
    EXPECT_NE(error.find("injected fault at sample 37"), std::string::npos) << error;
  }
}

TEST(Fault, ExitAbortAndSegvKillTheWorkerProcess) {
  std::string error = LoadError(FaultKind::kExit, 2, kProcess);
  EXPECT_NE(error.find("exited with code 3"), std::string::npos) << error;
  error = LoadError(FaultKind::kAbort, 2, kProcess);
  EXPECT_NE(error.find("killed by signal 6 (SIGABRT)"), std::string::npos) << error;
  error = LoadError(FaultKind::kSegv, 2, kProcess);
  EXPECT_NE(error.find("killed by signal 11 (SIGSEGV)"), std::string::npos) << error;
}

TEST(Fault, HangIsCaughtByTheLoaderTimeout) {
  const std::string error = LoadError(FaultKind::kHang, 2, kProcess, 1.0);
  EXPECT_NE(error.find("timed out after"), std::string::npos) << error;
}

TEST(Fault, DestructiveKindsAreExceptionsOutsideWorkerProcesses) {
  for (FaultKind kind : {FaultKind::kExit, FaultKind::kAbort, FaultKind::kSegv, FaultKind::kHang}) {
    for (auto [workers, mode] : {std::pair{0, kProcess}, std::pair{2, kThread}}) {
      const std::string error = LoadError(kind, workers, mode);
      EXPECT_NE(error.find("is simulated as an exception outside a worker process"), std::string::npos)
          << FaultKindName(kind) << " " << workers << ": " << error;
    }
  }
}

}  // namespace
}  // namespace feedtune::workloads
