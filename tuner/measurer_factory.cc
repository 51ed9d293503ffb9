#include "tuner/measurer_factory.h"

#include "tuner/command_measurer.h"
#include "workloads/cpu_work.h"
#include "workloads/files_dataset.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::tuner {

OpenedWorkload OpenWorkload(const SweepConfig& config) {
  OpenedWorkload opened;
  const workloads::WorkloadOptions& w = config.workload;
  switch (w.kind) {
    case workloads::WorkloadKind::kSynthetic: {
      const workloads::CpuCalibration calibration = workloads::Calibrate();
      opened.calibration_json = calibration.ToJson();
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
      const workloads::CpuCalibration calibration = workloads::Calibrate();
      std::shared_ptr<workloads::FilesDataset> dataset;
      try {
        dataset = std::make_shared<workloads::FilesDataset>(w.files, w.synthetic, calibration);
      } catch (const workloads::DatasetNotFound& e) {
        throw WorkloadError(config.source + ": workload.path: " + e.what() +
                            " (make a dataset with `feedtune gen-data --out " + w.files.path + " --layout " +
                            workloads::FilesLayoutName(w.files.layout) + " ...`)");
      }
      opened.calibration_json = calibration.ToJson();
      opened.description = "files: " + dataset->Describe();
      opened.dataset = std::move(dataset);
      break;
    }
    case workloads::WorkloadKind::kCommand: {
      const std::string& argv0 = w.command.argv.empty() ? std::string() : w.command.argv[0];
      if (ResolveCommand(argv0).empty()) {
        throw WorkloadError(config.source + ": workload.argv[0]: '" + argv0 + "' " +
                            (argv0.find('/') == std::string::npos ? "not found in PATH"
                                                                  : "not found or not executable"));
      }
      opened.description = "command: " + argv0 + " with " + std::to_string(w.command.argv.size() - 1) +
                           " arguments, one run per repeat (timeout " +
                           std::to_string(static_cast<int64_t>(w.command.timeout_s)) +
                           " s)";
      return opened;
    }
  }
  if (config.loader.worker_mode == loader::WorkerMode::kProcess) {
    opened.fork_server = std::make_shared<loader::ForkServer>(opened.dataset);
  }
  return opened;
}

std::unique_ptr<TrialMeasurer> MakeMeasurer(const SweepConfig& config, const OpenedWorkload& workload,
                                            device::Device& device, const std::atomic<bool>* stop) {
  if (config.workload.kind == workloads::WorkloadKind::kCommand) {
    return std::make_unique<CommandMeasurer>(config, stop);
  }
  return std::make_unique<TrialRunner>(config, device, workload.dataset, stop, workload.fork_server);
}

}  // namespace feedtune::tuner
