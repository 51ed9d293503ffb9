#include "tuner/measure/measurer_factory.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tuner/measure/command_measurer.h"
#include "tuner/measure/kill_cause.h"
#include "tuner/measure/torch_cost_dataset.h"
#include "storage/credentials.h"
#include "workloads/remote_dataset.h"
#include "workloads/remote_npy_dataset.h"
#include "workloads/remote_tar_dataset.h"
#include "workloads/cpu_work.h"
#include "workloads/files_dataset.h"
#include "workloads/format_inspect.h"
#include "workloads/hdf5_dataset.h"
#include "workloads/lmdb_dataset.h"
#include "workloads/npy_dataset.h"
#include "workloads/synthetic_dataset.h"
#include "workloads/tar_dataset.h"
#include "workloads/tfrecord_dataset.h"

namespace feedtune::tuner {
namespace {

// Builds a format dataset. What the user named wrong or what is damaged in
// their file (a bad header, a shape larger than the file, a missing HDF5
// dataset) is found here, before the first trial, and is a WorkloadError
// (exit 2) whose message names the config, the key and the file.
template <typename Open>
auto OpenFormat(const SweepConfig& config, Open open) -> decltype(open()) {
  const std::string kind = workloads::WorkloadKindName(config.workload.kind);
  try {
    return open();
  } catch (const workloads::DatasetNotFound& e) {
    throw WorkloadError(config.source + ": workload.path: " + e.what() + " (make one with `feedtune gen-data --layout " +
                        kind + " --out " +
                        (config.workload.files.path.empty() ? std::string("DIR") : config.workload.files.path) +
                        " ...`)");
  } catch (const workloads::DatasetCorrupt& e) {
    throw WorkloadError(config.source + ": workload.path: " + e.what());
  }
}

// The calibration as the run record keeps it.
results::CpuCalibrationFacts CalibrationFacts(const workloads::CpuCalibration& c) {
  return {"CLOCK_THREAD_CPUTIME_ID", c.clock_read_ns, c.work_bytes_per_s, static_cast<int64_t>(c.chunk_bytes),
          c.chunk_us, c.clock_overhead, c.check_requested_us, c.check_spent_us, c.calibration_s};
}

// The calibration back from the run record's form, for the torch costs' CPU burns.
workloads::CpuCalibration CalibrationOf(const results::CpuCalibrationFacts& f) {
  workloads::CpuCalibration c;
  c.clock_read_ns = f.clock_read_ns;
  c.work_bytes_per_s = f.work_bytes_per_s;
  c.chunk_bytes = static_cast<size_t>(f.chunk_bytes);
  c.chunk_us = f.chunk_us;
  c.clock_overhead = f.clock_overhead;
  c.check_requested_us = f.check_requested_us;
  c.check_spent_us = f.check_spent_us;
  c.calibration_s = f.calibration_s;
  return c;
}

// A format kind (npy, hdf5, lmdb, tfrecord, tar): its dataset built with this
// machine's CPU calibration, described as "KIND: what was opened", followed
// by the traps `feedtune inspect` finds (`warnings`, may be empty).
template <typename Dataset, typename Make>
void OpenFormatKind(const SweepConfig& config, OpenedWorkload* opened, Make make,
                    std::function<std::vector<std::string>(const Dataset&)> warnings = nullptr) {
  const workloads::CpuCalibration calibration = workloads::Calibrate();
  const std::shared_ptr<Dataset> dataset = OpenFormat(config, [&] { return make(calibration); });
  opened->cpu_calibration = CalibrationFacts(calibration);
  opened->description = std::string(workloads::WorkloadKindName(config.workload.kind)) + ": " + dataset->Describe();
  if (warnings) {
    for (const std::string& warning : warnings(*dataset)) opened->description += "\nwarning: " + warning;
  }
  opened->dataset = dataset;
}

// Remote data (an s3:// prefix, an http(s) URL): its dataset built with this
// machine's CPU calibration, described as "KIND: what was opened"; a store
// that refuses, an empty prefix or credentials that do not fit fail the
// open, named.
template <typename Dataset, typename Make>
void OpenRemote(const SweepConfig& config, OpenedWorkload* opened, Make make) {
  const workloads::CpuCalibration calibration = workloads::Calibrate();
  std::shared_ptr<Dataset> dataset;
  try {
    dataset = make(calibration);
  } catch (const std::exception& e) {
    throw WorkloadError(config.source + ": workload.path: " + e.what());
  }
  opened->cpu_calibration = CalibrationFacts(calibration);
  opened->description = std::string(workloads::WorkloadKindName(config.workload.kind)) + ": " + dataset->Describe();
  opened->dataset = std::move(dataset);
}

// A command workload: its argv[0] checked, and what it runs, said (its
// measurer starts the processes, tuner/measure/command_measurer.h).
void DescribeCommand(const SweepConfig& config, OpenedWorkload* opened) {
  const workloads::WorkloadOptions& w = config.workload;
  const std::string& argv0 = w.command.argv.empty() ? std::string() : w.command.argv[0];
  if (ResolveCommand(argv0).empty()) {
    throw WorkloadError(config.source + ": workload.argv[0]: '" + argv0 + "' " +
                        (argv0.find('/') == std::string::npos ? "not found in PATH"
                                                              : "not found or not executable"));
  }
  opened->description = "command: " + argv0 + " with " + std::to_string(w.command.argv.size() - 1) +
                        (w.command.protocol == workloads::CommandProtocol::kServe
                             ? " arguments, one serving process per sweep (protocol serve, per-trial timeout "
                             : " arguments, one run per repeat (protocol run, timeout ") +
                        std::to_string(static_cast<int64_t>(w.command.timeout_s)) +
                        " s)";
  if (const int ranks = node::ResolveRanks(config); ranks > 1) {
    opened->description = std::to_string(ranks) + " ranks (sweep.ranks), each a process of the " +
                          opened->description + ", with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT";
  }
}

}  // namespace

OpenedWorkload OpenWorkload(const SweepConfig& config, const results::TorchCosts* torch_costs) {
  OpenedWorkload opened;
  const workloads::WorkloadOptions& w = config.workload;
  // The rank processes first, while this process has one thread (tuner/measure/node_measurer.h).
  if (const int ranks = node::ResolveRanks(config); ranks > 1) {
    // A command's ranks are its own processes, started per repeat by its
    // measurer (tuner/measure/command_ranks.h); only the run protocol has them.
    if (w.kind == workloads::WorkloadKind::kCommand && w.command.protocol == workloads::CommandProtocol::kServe) {
      throw WorkloadError(config.source + ": sweep.ranks: " + std::to_string(ranks) +
                          " ranks of a serving command (workload.protocol: serve) are not supported: a serving "
                          "process is one rank; use workload.protocol: run with the knobs as {placeholders} in "
                          "argv (feedtune starts the ranks per repeat; configs/torch-probe-2ranks.yaml), or "
                          "sweep.ranks: 1");
    }
    if (w.kind != workloads::WorkloadKind::kCommand) opened.ranks = std::make_shared<node::RankSet>(config, ranks);
  }
  switch (w.kind) {
    case workloads::WorkloadKind::kSynthetic: {
      const workloads::CpuCalibration calibration = workloads::Calibrate();
      opened.cpu_calibration = CalibrationFacts(calibration);
      opened.description = "synthetic: " + std::to_string(w.synthetic.samples) + " samples of " +
                           (w.synthetic.size.dist == workloads::SizeDist::kFixed
                                ? std::to_string(w.synthetic.sample_bytes) + " bytes"
                                : std::string("up to ") + std::to_string(w.synthetic.sample_bytes) + " bytes (" +
                                      workloads::SizeDistName(w.synthetic.size.dist) + ")") +
                           ", " + std::to_string(w.synthetic.cpu_us_per_sample) + " us CPU and " +
                           std::to_string(w.synthetic.io_us_per_sample) + " us wait per sample";
      opened.dataset = std::make_shared<workloads::SyntheticDataset>(w.synthetic, calibration);
      break;
    }
    case workloads::WorkloadKind::kFiles: {
      if (workloads::IsRemotePath(w.files.path)) {
        OpenRemote<workloads::RemoteDataset>(config, &opened, [&](const workloads::CpuCalibration& calibration) {
          return std::make_shared<workloads::RemoteDataset>(w.files, w.synthetic, calibration,
                                                            storage::ProcessEnvironment());
        });
        break;
      }
      const workloads::CpuCalibration calibration = workloads::Calibrate();
      std::shared_ptr<workloads::FilesDataset> dataset;
      try {
        dataset = std::make_shared<workloads::FilesDataset>(w.files, w.synthetic, calibration);
      } catch (const workloads::DatasetNotFound& e) {
        throw WorkloadError(config.source + ": workload.path: " + e.what() +
                            " (make a dataset with `feedtune gen-data --out " + w.files.path + " --layout " +
                            workloads::FilesLayoutName(w.files.layout) + " ...`)");
      }
      opened.cpu_calibration = CalibrationFacts(calibration);
      opened.description = "files: " + dataset->Describe();
      opened.dataset = std::move(dataset);
      break;
    }
    case workloads::WorkloadKind::kNpy:
      if (workloads::IsRemotePath(w.files.path)) {
        OpenRemote<workloads::RemoteNpyDataset>(config, &opened, [&](const workloads::CpuCalibration& calibration) {
          return std::make_shared<workloads::RemoteNpyDataset>(w.files, w.synthetic, calibration,
                                                               storage::ProcessEnvironment());
        });
        break;
      }
      OpenFormatKind<workloads::NpyDataset>(config, &opened, [&](const workloads::CpuCalibration& calibration) {
        return std::make_shared<workloads::NpyDataset>(w.files, w.synthetic, calibration);
      });
      break;
    case workloads::WorkloadKind::kHdf5:
      OpenFormatKind<workloads::Hdf5Dataset>(
          config, &opened,
          [&](const workloads::CpuCalibration& calibration) {
            return std::make_shared<workloads::Hdf5Dataset>(w.files, w.format, w.synthetic, calibration);
          },
          [&](const workloads::Hdf5Dataset& d) {
            return workloads::Hdf5Warnings(d.images(), w.format.hdf5_chunk_cache_mb);
          });
      break;
    case workloads::WorkloadKind::kLmdb:
      OpenFormatKind<workloads::LmdbDataset>(
          config, &opened,
          [&](const workloads::CpuCalibration& calibration) {
            return std::make_shared<workloads::LmdbDataset>(w.files, w.format, w.synthetic, calibration);
          },
          [&](const workloads::LmdbDataset& d) { return workloads::LmdbWarnings(d.info(), w.format.lmdb_readahead); });
      break;
    case workloads::WorkloadKind::kTfRecord:
      OpenFormatKind<workloads::TfRecordDataset>(config, &opened, [&](const workloads::CpuCalibration& calibration) {
        return std::make_shared<workloads::TfRecordDataset>(w.files, w.format, w.synthetic, calibration);
      });
      break;
    case workloads::WorkloadKind::kTar:
      if (workloads::IsRemotePath(w.files.path)) {
        OpenRemote<workloads::RemoteTarDataset>(config, &opened, [&](const workloads::CpuCalibration& calibration) {
          return std::make_shared<workloads::RemoteTarDataset>(w.files, w.format, w.synthetic, calibration,
                                                               storage::ProcessEnvironment());
        });
        break;
      }
      OpenFormatKind<workloads::TarDataset>(config, &opened, [&](const workloads::CpuCalibration& calibration) {
        return std::make_shared<workloads::TarDataset>(w.files, w.format, w.synthetic, calibration);
      });
      break;
    case workloads::WorkloadKind::kCommand:
      DescribeCommand(config, &opened);
      return opened;
  }
  // Wrapped before the fork server copies it, so its workers see the switch.
  opened.stages = std::make_shared<StageDataset>(opened.dataset);
  opened.dataset = opened.stages;
  if (torch_costs != nullptr && !opened.ranks && w.synthetic.torch_costs == workloads::TorchCostsMode::kAuto) {
    opened.torch_costs = *torch_costs;
    opened.dataset = std::make_shared<TorchCostDataset>(opened.dataset, *torch_costs,
                                                        static_cast<int>(config.loader.knobs.batch_size),
                                                        CalibrationOf(*opened.cpu_calibration));
    opened.description += "\npaying this host's torch costs (workload.torch_costs auto): " +
                          results::TorchCostsLine(*torch_costs);
  }
  if (opened.ranks) {
    opened.description = std::to_string(opened.ranks->ranks()) + " ranks (sweep.ranks), each reading its " +
                         "DistributedSampler share of " + opened.description;
    return opened;  // each rank has its own fork server
  }
  if (config.loader.worker_mode == loader::WorkerMode::kProcess) {
    opened.fork_server = std::make_shared<loader::ForkServer>(opened.dataset);
  }
  return opened;
}

std::unique_ptr<TrialMeasurer> MakeMeasurer(const SweepConfig& config, const OpenedWorkload& workload,
                                            device::Device& device, const std::atomic<bool>* stop, int serve_fd) {
  if (config.workload.kind == workloads::WorkloadKind::kCommand) {
    auto command = std::make_unique<CommandMeasurer>(config, stop);
    if (serve_fd >= 0) command->AttachToCaller(serve_fd);
    return std::make_unique<KillNamingMeasurer>(std::move(command));
  }
  if (workload.ranks) {
    workload.ranks->set_stop(stop);
    workload.ranks->WaitReady();
    return std::make_unique<KillNamingMeasurer>(std::make_unique<node::NodeMeasurer>(workload.ranks));
  }
  auto runner = std::make_unique<TrialRunner>(config, device, workload.dataset, stop, workload.fork_server);
  if (workload.torch_costs) runner->set_torch_costs(*workload.torch_costs, CalibrationOf(*workload.cpu_calibration));
  return runner;
}

}  // namespace feedtune::tuner
