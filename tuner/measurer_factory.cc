#include "tuner/measurer_factory.h"

#include "workloads/synthetic_dataset.h"

namespace feedtune::tuner {

std::unique_ptr<TrialMeasurer> MakeMeasurer(const SweepConfig& config, device::Device& device,
                                            const std::atomic<bool>* stop) {
  switch (config.workload.kind) {
    case workloads::WorkloadKind::kSynthetic:
      return std::make_unique<TrialRunner>(
          config, device, std::make_shared<workloads::SyntheticDataset>(config.workload.synthetic), stop);
  }
  throw std::runtime_error("unknown workload kind");
}

}  // namespace feedtune::tuner
