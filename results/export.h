// `feedtune export`: the best settings of a run, in a form a training job takes
// as it is. Pure functions of a loaded run (report.h's RunView).
//
//   torch  Python defining DATALOADER_KWARGS (a dict for
//          torch.utils.data.DataLoader) and NON_BLOCKING (for x.to(device, ...))
//   json   the object of the JSON report's best.config (docs/json-report.md)
//   yaml   the same keys, with provenance comments
//   env    FEEDTUNE_<KEY>=<value> lines (booleans as 1/0), for shells and env files
//
// Settings an older torch lacks are noted (a comment and, in the torch form, a
// runtime warning), never dropped. With num_workers 0, prefetch_factor is left
// to torch (null / unset) and persistent_workers is false: torch rejects
// anything else without workers.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "results/report.h"

namespace feedtune::results {

enum class ExportFormat { kTorch, kJson, kYaml, kEnv };

// nullopt for an unknown name.
std::optional<ExportFormat> ParseExportFormat(std::string_view name);

class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a setting chosen for a machine came from (`export --machine this`):
// said in the output's header (a comment line; the "source" key in JSON).
struct ExportSource {
  std::string match;  // host | class | neighbour (results/fleet.h RunMatchName)
  std::string for_host;  // the host asking
  std::string why;       // StoredRunMatch::Describe()
  std::string db_path;
  std::string run_host;  // the host that ran the chosen run
  std::string run_class;
};

// Throws ExportError (naming the run and what to do) when the run has no best
// trial. With a source, the output says where the setting came from.
std::string RenderExport(const RunView& view, ExportFormat format, const ExportSource* source = nullptr);

}  // namespace feedtune::results
