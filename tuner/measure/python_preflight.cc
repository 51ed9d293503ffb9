#include "tuner/measure/python_preflight.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tuner/measure/command_measurer.h"
#include "workloads/command_args.h"

namespace feedtune::tuner {
namespace {

using loader::StartMethod;

bool Pickles(StartMethod method) { return method == StartMethod::kForkserver || method == StartMethod::kSpawn; }

// The preflight line: the last stdout line that is a JSON object with "preflight".
nlohmann::json FindPreflightLine(const std::string& stdout_text) {
  std::istringstream lines(stdout_text);
  nlohmann::json found;
  for (std::string line; std::getline(lines, line);) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line.substr(start), nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("preflight") && j["preflight"].is_object()) found = j["preflight"];
  }
  return found;
}

std::string Text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What the preflight object says.
PythonPreflight FromLine(const nlohmann::json& line) {
  PythonPreflight result;
  result.answered = true;
  result.facts.python_version = Text(line, "python_version");
  result.facts.torch_version = Text(line, "torch_version");
  result.facts.default_start_method = Text(line, "default_start_method");
  const auto checked = line.find("pickle_checked");
  result.pickle_checked = checked != line.end() && checked->is_boolean() && checked->get<bool>();
  result.pickle_error = Text(line, "pickle_error");
  return result;
}

}  // namespace

bool IsPythonCommand(const SweepConfig& config) {
  if (config.workload.kind != workloads::WorkloadKind::kCommand) return false;
  const std::vector<std::string>& argv = config.workload.command.argv;
  if (argv.empty()) return false;
  if (std::filesystem::path(argv[0]).filename().string().rfind("python", 0) == 0) return true;
  return std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
    return a.size() > 3 && a.compare(a.size() - 3, 3, ".py") == 0;
  });
}

std::string PickleCheckFor(const SweepConfig& config) {
  const StartMethod configured = config.loader.knobs.multiprocessing_context;
  const std::vector<StartMethod>& listed = config.sweep.start_methods;
  if (Pickles(configured) || std::any_of(listed.begin(), listed.end(), Pickles)) return "always";
  // default: the interpreter's method is used by every trial; auto: the phase
  // runs (and tries forkserver and spawn) exactly when that default is not fork.
  if (configured == StartMethod::kDefault || listed.empty()) return "unless-fork";
  return "";
}

StartMethod DefaultStartMethod(const results::PythonFacts& facts) {
  StartMethod method = StartMethod::kDefault;
  if (!loader::StartMethodFromName(facts.default_start_method, &method)) return StartMethod::kDefault;
  return method;
}

PythonPreflight RunPythonPreflight(const SweepConfig& config, const std::atomic<bool>* stop) {
  PythonPreflight result;
  workloads::CommandContext context;
  context.knobs = config.loader.knobs;
  context.measure_seconds = config.sweep.measure_seconds;
  context.warmup_batches = config.sweep.warmup_batches;
  context.step_us = config.device.step_us;
  context.sync_every_steps = config.device.sync_every_steps;
  std::vector<std::string> argv;
  for (const std::string& a : config.workload.command.argv) argv.push_back(workloads::ExpandPlaceholders(a, context));
  std::vector<std::string> env = workloads::PlaceholderEnvironment(context);
  env.push_back("FEEDTUNE_PROTOCOL=preflight");
  env.push_back("FEEDTUNE_PICKLE_CHECK=" + PickleCheckFor(config));
  const CommandRun run = RunCommand(argv, env, config.workload.command.timeout_s, stop);  // throws Interrupted
  const nlohmann::json line = FindPreflightLine(run.stdout_tail);
  if (line.is_null()) {
    result.note = "the command gave no preflight line (" +
                  (run.started ? run.Cause(config.workload.command.timeout_s) : run.spawn_error) +
                  "), so the run records no Python or torch version and the start methods are not swept; "
                  "the probe and feedtune.serve answer FEEDTUNE_PROTOCOL=preflight (docs/command-protocol.md)";
    return result;
  }
  return FromLine(line);
}

PythonPreflight PreflightFromText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("preflight")) j = j["preflight"];
  if (!j.is_object() || Text(j, "default_start_method").empty()) return {};
  return FromLine(j);
}

}  // namespace feedtune::tuner
