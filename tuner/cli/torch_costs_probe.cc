#include "tuner/cli/torch_costs_probe.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "results/fingerprint.h"
#include "results/store.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/install_paths.h"

namespace feedtune::cli {

std::vector<std::string> TorchPythonCandidates(const std::string& python) {
  if (!python.empty()) return {python};
  const char* env = std::getenv("FEEDTUNE_PYTHON");
  if (env != nullptr) return {env};
  return {"python3", "/usr/bin/python3"};
}

namespace {

// The probe's last line that parses as a JSON object, or null.
nlohmann::json LastJsonLine(const std::string& out) {
  std::istringstream lines(out);
  std::string line;
  nlohmann::json last;
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) last = j;
  }
  return last;
}

}  // namespace

std::optional<TorchPython> FindTorchPython(const std::vector<std::string>& candidates,
                                           std::vector<std::string>* tried) {
  // The answer on stdout either way, so that an ImportError is a reason, not a traceback.
  const std::string script =
      "import json\ntry:\n import torch\nexcept Exception as e:\n print(json.dumps({'error': '%s: %s' % "
      "(type(e).__name__, e)}))\nelse:\n print(json.dumps({'torch': torch.__version__}))\n";
  for (const std::string& interpreter : candidates) {
    std::string out;
    const int code = RunCapturing({interpreter, "-c", script}, &out);
    if (code < 0) {
      tried->push_back(interpreter + ": cannot run it (" + std::strerror(errno) + ")");
      continue;
    }
    const nlohmann::json answer = LastJsonLine(out);
    if (answer.contains("torch") && answer["torch"].is_string()) {
      return TorchPython{interpreter, answer["torch"].get<std::string>()};
    }
    tried->push_back(interpreter + ": " + (answer.contains("error") && answer["error"].is_string()
                                               ? answer["error"].get<std::string>()
                                               : "exited " + std::to_string(code) + " without an answer"));
  }
  return std::nullopt;
}

std::optional<results::TorchCosts> MeasureTorchCosts(const std::string& python, std::string* why) {
  const std::string package_dir = ThisDataRoot().python_dir;
  if (package_dir.empty()) {
    *why = "feedtune's Python package is neither installed beside this binary nor in a checkout";
    return std::nullopt;
  }
  // The package's folder first, so that the probe is this build's.
  const std::string script = "import sys; sys.path.insert(0, sys.argv[1]); from feedtune.torch_costs import main; "
                             "sys.exit(main([]))";
  std::vector<std::string> tried;
  const std::vector<std::string> candidates = TorchPythonCandidates(python);
  if (candidates.size() == 1 && (candidates[0].empty() || candidates[0] == "none")) {
    *why = "FEEDTUNE_PYTHON is '" + candidates[0] + "': no torch probe runs";
    return std::nullopt;
  }
  for (const std::string& interpreter : candidates) {
    std::string out;
    const int code = RunCapturing({interpreter, "-c", script, package_dir}, &out);
    if (code < 0) {
      tried.push_back(interpreter + ": cannot run it (" + std::strerror(errno) + ")");
      continue;
    }
    const nlohmann::json answer = LastJsonLine(out);
    if (answer.contains("torch_costs")) {
      try {
        return results::TorchCostsFromProbe(answer["torch_costs"]);
      } catch (const std::exception& e) {
        *why = interpreter + ": " + e.what();
        return std::nullopt;
      }
    }
    tried.push_back(interpreter + ": " + (answer.contains("error") && answer["error"].is_string()
                                              ? answer["error"].get<std::string>()
                                              : "the probe exited " + std::to_string(code) + " without an answer"));
  }
  *why = "no interpreter measured torch's costs";
  for (const std::string& t : tried) *why += "; " + t;
  *why += " (name one with --python or FEEDTUNE_PYTHON; Debian: apt-get install python3-torch)";
  return std::nullopt;
}

std::optional<results::TorchCosts> SweepTorchCosts(const tuner::SweepConfig& config, const std::string& db_path,
                                                   const std::function<void(const std::string&)>& note,
                                                   bool* measured) {
  *measured = false;
  std::string stored_note;
  std::optional<results::TorchCosts> costs = StoredTorchCosts(config, db_path, &stored_note);
  if (costs || !PaysTorchCosts(config) || stored_note.empty()) return costs;
  const std::vector<std::string> candidates = TorchPythonCandidates("");
  if (candidates.size() == 1 && (candidates[0].empty() || candidates[0] == "none")) return std::nullopt;
  note("feedtune: no torch costs for this host in " + db_path +
       " yet: measuring them first (feedtune calibrate, about 10 s), so that this native sweep names what a torch "
       "job would run best");
  std::string why;
  costs = MeasureTorchCosts("", &why);
  if (!costs) {
    note("feedtune: " + stored_note + " (" + why + ")");
    return std::nullopt;
  }
  costs->measured_at = NowIso8601();
  *measured = true;
  return costs;
}

void StoreTorchCosts(results::Store& store, const results::TorchCosts& costs) {
  store.SetTorchCosts(results::HostOf(results::ReadFingerprint()).Key(), costs);
}

}  // namespace feedtune::cli
