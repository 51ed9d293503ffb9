// feedtune calibrate: this box's torch DataLoader costs, measured once on a
// dataset that does nothing (tuner/cli/torch_costs_probe.h) and stored per host
// in the results file, where every later native sweep and trial on this host
// reads them and pays them (workload.torch_costs auto, docs/measurement.md#torch-costs).
#include <iostream>

#include "results/fingerprint.h"
#include "results/store.h"
#include "results/torch_costs.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/torch_costs_probe.h"

namespace feedtune::cli {
namespace {

constexpr const char* kCalibrateUsage = R"(Usage: feedtune calibrate [--db FILE] [--python PATH] [--json]

Measures what torch's DataLoader costs on this box beyond the dataset's own
work, and stores it for this host in the results file. A native sweep or trial
(synthetic, files, npy, hdf5, lmdb, tfrecord, tar) with that file then pays it:
each worker starts as slowly as a torch worker, each sample costs what torch's
loop, default_collate and the pickling onto the queue cost, and the main
process pays for rebuilding each batch. So the setting a native sweep names
holds for a torch job on this box. workload.torch_costs: off turns it off.

The probe runs feedtune.torch_costs (feedtune's Python package) over a dataset
that does nothing, at num_workers 0 and 1, batch sizes 1 and 16, samples of
64 B and 256 KiB: about 10 s on 2 CPUs. Measure again after changing torch or
Python; the stored costs say which versions they were measured with.

)";

}  // namespace

int RunCalibrate(const Args& args) {
  po::options_description options("Options");
  std::string db_path = kDefaultDb;
  std::string python;
  options.add_options()("help,h", "this help")(
      "db", po::value(&db_path), "the results file to store the costs in (default results/feedtune.db)")(
      "python", po::value(&python),
      "the interpreter that runs torch (default: $FEEDTUNE_PYTHON, else python3, then /usr/bin/python3)")(
      "json", "print the costs as one JSON object");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kCalibrateUsage, &code);
  if (!vm) return code;
  std::cerr << "feedtune calibrate: measuring torch's DataLoader costs on an empty dataset (about 10 s)\n";
  std::string why;
  std::optional<results::TorchCosts> costs = MeasureTorchCosts(python, &why);
  if (!costs) {
    std::cerr << "feedtune: calibrate: " << why << "\n";
    return kExitFailure;
  }
  costs->measured_at = NowIso8601();
  // The host, not its label: a sweep with --label finds the same costs.
  const std::string host = results::HostOf(results::ReadFingerprint()).Key();
  try {
    results::Store store = results::Store::Open(db_path);
    store.SetTorchCosts(host, *costs);
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  }
  if (vm->count("json")) {
    nlohmann::ordered_json j = results::TorchCostsJson(*costs);
    j["host"] = host;
    j["db"] = db_path;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << results::TorchCostsLine(*costs) << "\nstored for " << host << " in " << db_path
              << ": native sweeps and trials there pay them (workload.torch_costs auto)\n";
  }
  return kExitOk;
}

}  // namespace feedtune::cli
