// Where this binary's data lies (the ready configs, the probe harness, the
// Python package): beside an installed binary (<prefix>/bin/feedtune with
// <prefix>/share/feedtune), else in the checkout a build tree was made from.
// A relative path a user or a config names (configs/quickstart.yaml,
// workloads/python/feedtune_probe.py) is taken from the working directory
// first, as always; only when it is not there is it looked up in that root,
// so an installed feedtune runs the ready configs from any folder.
#pragma once

#include <string>

#include "tuner/config/config.h"

namespace feedtune::cli {

struct DataRoot {
  std::string dir;         // share/feedtune of the install, or the checkout; empty when neither exists
  bool installed = false;  // true: beside an installed binary (the checkout is never looked at then)
  std::string python_dir;  // the folder holding the feedtune Python package: what goes on PYTHONPATH
};

// Found once per process from /proc/self/exe.
const DataRoot& ThisDataRoot();

// `path` when it exists as given (from the working directory), else the same
// relative path under the data root when it is there (a note on stderr says
// so), else `path` unchanged for the caller's own "not found" message.
std::string ResolveDataPath(const std::string& path);

// A command workload's argv: each relative path that is missing here but lies
// under the data root is made absolute (the probe harness of an installed
// feedtune). The written argv is kept in config.argv_as_written, so the
// workload hash and the stored config do not depend on where feedtune is.
void ResolveCommandPaths(tuner::SweepConfig& config);

}  // namespace feedtune::cli
