// `feedtune fleet slurm` and `feedtune fleet k8s`: the job files that run one
// sweep per node under a scheduler and merge what comes back (docs/fleets.md:
// the scheduler distributes, feedtune writes its job files and merges). The
// shell parts are templates kept as files (tuner/cli/fleet_templates/), filled
// in here; the Kubernetes manifests are built with yaml-cpp, so every value is
// quoted as YAML needs.
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "tuner/cli/cli_util.h"
#include "tuner/cli/install_paths.h"
#include "tuner/cli/fleet_templates.h"
#include "tuner/cli/version.h"


namespace feedtune::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFleetUsage = R"(Usage: feedtune fleet slurm --config C --nodes N --results DIR [options]
       feedtune fleet k8s --config C --nodes N --image IMG --results-pvc NAME [options]

Writes the job files that run `feedtune sweep` on every node of a cluster, one
results file per node, and a merge job that gathers them into one fleet.db and
fleet.html (`feedtune merge`, `feedtune compare --format html`). The scheduler
distributes; feedtune only writes its job files. `feedtune fleet slurm --help`
and `feedtune fleet k8s --help` give the details.)";

constexpr const char* kSlurmUsage = R"(Usage: feedtune fleet slurm --config C --nodes N --results DIR
           [--partition P] [--time T] [--gpus-per-node G] [--feedtune PATH] [--submit]

Prints a script that submits, with sbatch, a job array of N tasks (one exclusive
task per node, --exclusive) each running `feedtune sweep --config C` into its own
file DIR/sweep-HOST-taskI.db, and a merge job that runs after all of them
(--dependency=afterany, so also when some failed) and writes DIR/fleet.db,
DIR/fleet.html and DIR/fleet-summary.txt (which tasks are missing, and why).
A failing task (bad config, killed sweep) costs only its own results. Logs go
to DIR/logs/. Paths in the script are absolute; DIR and the config must be on a
filesystem every node sees. The feedtune binary is this one unless --feedtune.

--submit runs both sbatch submissions itself (the job scripts are kept in DIR)
and prints the two job ids.

Examples:
  feedtune fleet slurm --config configs/quickstart.yaml --nodes 16 --results /shared/fleet > fleet.sh
  bash fleet.sh
  feedtune fleet slurm --config configs/quickstart.yaml --nodes 16 --results /shared/fleet \
      --partition gpu --time 01:00:00 --gpus-per-node 8 --submit)";

constexpr const char* kK8sUsage = R"(Usage: feedtune fleet k8s --config C --nodes N --image IMG --results-pvc NAME
           [--gpus-per-node G] [--shm-size S] [--name NAME] [--feedtune PATH] [--merge-wait S]

Prints one multi-document YAML for `kubectl apply -f`: a ConfigMap holding the
config; an Indexed Job (completions = parallelism = N, one pod per node by
podAntiAffinity on the job's label) whose pods sweep into the PersistentVolume-
Claim NAME (mounted at /results, ReadWriteMany: every node writes to it) as
sweep-NODE-taskINDEX.db; and a merge Job that waits until every index has
reported (at most --merge-wait seconds), then writes /results/fleet.db,
fleet.html and fleet-summary.txt. /dev/shm is a memory-backed emptyDir of
--shm-size (a container's default 64 MB breaks worker loaders, whose batches
travel in shared memory). The image must hold feedtune (on its PATH, or give
--feedtune) and /bin/sh.

Example:
  feedtune fleet k8s --config configs/quickstart.yaml --nodes 8 --image registry/feedtune:1 \
      --results-pvc feedtune-results --gpus-per-node 8 --shm-size 32Gi > fleet.yaml
  kubectl apply -f fleet.yaml)";

// A value as one shell word: single quotes, each ' written as '\''.
std::string ShellQuote(const std::string& value) {
  std::string quoted = "'";
  for (const char c : value) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// Replaces each {{key}} of `text`; a placeholder without a value is a bug in
// the templates, so it throws.
std::string Fill(std::string text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t open = text.find("{{", at);
    if (open == std::string::npos) break;
    const size_t close = text.find("}}", open);
    if (close == std::string::npos) break;
    const std::string key = text.substr(open + 2, close - open - 2);
    const auto it = values.find(key);
    if (it == values.end()) throw std::logic_error("fleet template: no value for {{" + key + "}}");
    out += text.substr(at, open - at) + it->second;
    at = close + 2;
  }
  return out + text.substr(at);
}

// A value that goes into an `#SBATCH` line or a file name, where Slurm takes
// the rest of the line as it is: no spaces, quotes or control characters.
bool SbatchSafe(const std::string& value, const char* option) {
  for (const unsigned char c : value) {
    if (std::isspace(c) || c == '\'' || c == '"' || c == '\\' || c < 0x20) {
      std::cerr << "feedtune: " << option << " '" << value
                << "' has a space, quote or control character, which an #SBATCH line cannot carry; "
                   "choose a path or value without one\n";
      return false;
    }
  }
  return true;
}

std::string ThisBinary() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string("feedtune") : self.string();
}

std::string CommandLine(const std::string& scheduler, const Args& args) {
  std::string line = "feedtune fleet " + scheduler;
  for (const std::string& arg : args) {
    const bool plain = arg.find_first_of(" '\"\\$`") == std::string::npos && !arg.empty();
    line += " " + (plain ? arg : ShellQuote(arg));
  }
  return line;
}

// The config must load here too: a typo found at submit time costs nothing, on
// 64 nodes an hour later it costs the fleet.
bool ConfigLoads(const std::string& path) {
  try {
    tuner::LoadConfig(path);
    return true;
  } catch (const tuner::ConfigError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return false;
  }
}

// `sbatch --parsable [extra...] script`: the job id, or "" after saying why not.
std::string Sbatch(const std::vector<std::string>& extra, const std::string& script) {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(script);
  std::string out;
  const int code = RunCapturing(argv, &out);
  if (code < 0) {
    std::cerr << "feedtune: cannot run sbatch: " << std::strerror(errno)
              << "; is Slurm's client installed and on PATH? (or run without --submit and submit the script "
                 "where sbatch works)\n";
    return "";
  }
  const std::string id = out.substr(0, out.find_first_of(";\n"));
  if (code != 0 || id.empty()) {
    std::cerr << "feedtune: sbatch " << script << " failed (exit " << code << ")\n";
    return "";
  }
  return id;
}

bool WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  file.close();
  if (!file) {
    std::cerr << "feedtune: cannot write " << path.string() << ": " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

int RunFleetSlurm(const Args& args) {
  po::options_description options("Options");
  std::string config_path, results_dir, partition, time_limit, feedtune = ThisBinary();
  int nodes = 0;
  int gpus_per_node = 0;
  options.add_options()("help,h", "this help")                                               //
      ("config", po::value(&config_path)->required(), "the sweep config (YAML), run on every node")  //
      ("nodes", po::value(&nodes)->required(), "number of nodes: one array task each")             //
      ("results", po::value(&results_dir)->required(), "folder for the results files, on a shared filesystem")
      ("partition", po::value(&partition), "Slurm partition (default: the cluster's default)")  //
      ("time", po::value(&time_limit), "time limit per task, as sbatch --time takes it (e.g. 01:00:00)")
      ("gpus-per-node", po::value(&gpus_per_node)->default_value(0), "GPUs to ask for per task (0: none)")
      ("feedtune", po::value(&feedtune), "the feedtune binary the nodes run (default: this one)")  //
      ("submit", "run sbatch now (both submissions) and print the job ids");
  int code = kExitOk;
  const auto vm = Parse(args, options, {}, kSlurmUsage, &code);
  if (!vm) return code;
  if (nodes < 1) {
    std::cerr << "feedtune: --nodes must be at least 1, got " << nodes << "\n";
    return kExitUsage;
  }
  if (gpus_per_node < 0) {
    std::cerr << "feedtune: --gpus-per-node must be 0 or more, got " << gpus_per_node << "\n";
    return kExitUsage;
  }
  config_path = ResolveDataPath(config_path);  // a ready config of an installed feedtune: its installed path
  if (!ConfigLoads(config_path)) return kExitUsage;
  const std::string config = fs::absolute(config_path).lexically_normal().string();
  const std::string results = fs::absolute(results_dir).lexically_normal().string();
  const std::string binary = feedtune.find('/') == std::string::npos ? feedtune : fs::absolute(feedtune).string();
  if (!SbatchSafe(results, "--results") || !SbatchSafe(partition, "--partition") ||
      !SbatchSafe(time_limit, "--time")) {
    return kExitUsage;
  }

  // Each option's line, the placeholder's own line ending the last one.
  std::string sbatch_options, merge_sbatch_options;
  auto add = [](std::string* lines, const std::string& option) { *lines += (lines->empty() ? "" : "\n") + option; };
  if (!partition.empty()) {
    add(&sbatch_options, "#SBATCH --partition=" + partition);
    add(&merge_sbatch_options, "#SBATCH --partition=" + partition);
  }
  if (!time_limit.empty()) add(&sbatch_options, "#SBATCH --time=" + time_limit);
  if (gpus_per_node > 0) add(&sbatch_options, "#SBATCH --gpus-per-node=" + std::to_string(gpus_per_node));
  const std::map<std::string, std::string> common = {
      {"job_name", "feedtune-fleet"},
      {"nodes", std::to_string(nodes)},
      {"last_task", std::to_string(nodes - 1)},
      {"results", results},
      {"results_q", ShellQuote(results)},
      {"config_q", ShellQuote(config)},
      {"feedtune_q", ShellQuote(binary)},
      {"wait_s", "0"},
  };
  auto with = [&common](std::map<std::string, std::string> more) {
    more.insert(common.begin(), common.end());
    return more;
  };
  const std::string array_script = Fill(fleet_templates::kSlurmArray, with({{"sbatch_options", sbatch_options}}));
  const std::string merge_body = Fill(fleet_templates::kFleetMerge, common);
  const std::string merge_script = Fill(
      fleet_templates::kSlurmMerge, with({{"merge_sbatch_options", merge_sbatch_options}, {"merge_body", merge_body}}));

  if (!vm->count("submit")) {
    // The here-documents' end markers follow on a line of their own.
    auto chomp = [](const std::string& text) { return text.substr(0, text.find_last_not_of('\n') + 1); };
    std::cout << Fill(fleet_templates::kSlurmSubmit,
                      with({{"version", BuildString()},
                            {"command_line", CommandLine("slurm", args)},
                            {"array_script", chomp(array_script)},
                            {"merge_script", chomp(merge_script)}}));
    return kExitOk;
  }

  // --submit: the same two submissions as the printed script, with the job
  // scripts kept beside the results they produce.
  std::error_code error;
  for (const char* sub : {"logs", "status"}) fs::create_directories(fs::path(results) / sub, error);
  if (error) {
    std::cerr << "feedtune: cannot create " << results << "/logs and /status: " << error.message() << "\n";
    return kExitFailure;
  }
  for (const auto& entry : fs::directory_iterator(fs::path(results) / "status", error)) {
    if (entry.path().extension() == ".exit") fs::remove(entry.path(), error);
  }
  const fs::path array_file = fs::path(results) / "fleet-array.sbatch";
  const fs::path merge_file = fs::path(results) / "fleet-merge.sbatch";
  if (!WriteFile(array_file, array_script) || !WriteFile(merge_file, merge_script)) return kExitFailure;
  const std::string array_job = Sbatch({}, array_file.string());
  if (array_job.empty()) return kExitFailure;
  const std::string merge_job = Sbatch({"--dependency=afterany:" + array_job}, merge_file.string());
  if (merge_job.empty()) {
    std::cerr << "feedtune: the array job " << array_job << " is submitted but its merge is not; run `sbatch "
              << "--dependency=afterany:" << array_job << " " << merge_file.string() << "` yourself\n";
    return kExitFailure;
  }
  std::cout << "array job " << array_job << " (" << nodes << " tasks), merge job " << merge_job << "; results in "
            << results << "\n";
  return kExitOk;
}

bool ValidName(const std::string& name) {
  // A DNS-1123 label short enough to leave room for "-merge", "-config" and
  // the pod suffixes Kubernetes adds.
  static const std::regex kLabel("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return name.size() <= 40 && std::regex_match(name, kLabel);
}

bool ValidQuantity(const std::string& quantity) {
  static const std::regex kQuantity("[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?");
  return std::regex_match(quantity, kQuantity);
}

void EmitLabels(YAML::Emitter& out, const std::string& key, const std::string& name) {
  out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "app.kubernetes.io/name" << YAML::Value << "feedtune";
  out << YAML::Key << key << YAML::Value << name;
  out << YAML::EndMap;
}

void EmitResultsVolumeMount(YAML::Emitter& out) {
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "results" << YAML::Key << "mountPath"
      << YAML::Value << "/results" << YAML::EndMap;
}

void EmitResultsVolume(YAML::Emitter& out, const std::string& pvc) {
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "results";
  out << YAML::Key << "persistentVolumeClaim" << YAML::Value << YAML::BeginMap << YAML::Key << "claimName"
      << YAML::Value << pvc << YAML::EndMap << YAML::EndMap;
}

std::string ConfigMapYaml(const std::string& name, const std::string& config_text) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "v1";
  out << YAML::Key << "kind" << YAML::Value << "ConfigMap";
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << name + "-config";
  EmitLabels(out, "feedtune/fleet", name);
  out << YAML::EndMap;
  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "config.yaml" << YAML::Value << YAML::Literal << config_text;
  out << YAML::EndMap << YAML::EndMap;
  return out.c_str();
}

struct K8sFleet {
  std::string name, image, pvc, shm_size, feedtune, config_text;
  int nodes = 0;
  int gpus_per_node = 0;
  int merge_wait_s = 0;
};

std::string SweepJobYaml(const K8sFleet& f, const std::string& script) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "batch/v1";
  out << YAML::Key << "kind" << YAML::Value << "Job";
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << f.name;
  EmitLabels(out, "feedtune/fleet", f.name);
  out << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "completionMode" << YAML::Value << "Indexed";
  out << YAML::Key << "completions" << YAML::Value << f.nodes;
  out << YAML::Key << "parallelism" << YAML::Value << f.nodes;
  // Pod failures (eviction, a lost node) are retried; a failing sweep does not
  // fail its pod (see the script), so it never uses this up.
  out << YAML::Key << "backoffLimit" << YAML::Value << f.nodes;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  EmitLabels(out, "feedtune/fleet", f.name);
  out << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "restartPolicy" << YAML::Value << "Never";
  // One pod per node: no two pods of this fleet on the same hostname.
  out << YAML::Key << "affinity" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "podAntiAffinity" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "requiredDuringSchedulingIgnoredDuringExecution" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap << YAML::Key << "labelSelector" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "matchLabels" << YAML::Value << YAML::BeginMap << YAML::Key << "feedtune/fleet" << YAML::Value
      << f.name << YAML::EndMap << YAML::EndMap;
  out << YAML::Key << "topologyKey" << YAML::Value << "kubernetes.io/hostname" << YAML::EndMap;
  out << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "sweep";
  out << YAML::Key << "image" << YAML::Value << f.image;
  out << YAML::Key << "command" << YAML::Value << YAML::BeginSeq << "/bin/sh" << "-c" << YAML::Literal << script
      << YAML::EndSeq;
  out << YAML::Key << "env" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "NODE_NAME" << YAML::Key << "valueFrom"
      << YAML::Value << YAML::BeginMap << YAML::Key << "fieldRef" << YAML::Value << YAML::BeginMap << YAML::Key
      << "fieldPath" << YAML::Value << "spec.nodeName" << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "JOB_COMPLETION_INDEX" << YAML::Key << "valueFrom"
      << YAML::Value << YAML::BeginMap << YAML::Key << "fieldRef" << YAML::Value << YAML::BeginMap << YAML::Key
      << "fieldPath" << YAML::Value << "metadata.annotations['batch.kubernetes.io/job-completion-index']"
      << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  out << YAML::EndSeq;
  if (f.gpus_per_node > 0) {
    // Extended resources are asked for in limits (requests, when given, must equal them).
    const std::string gpus = std::to_string(f.gpus_per_node);
    out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
    for (const char* kind : {"requests", "limits"}) {
      out << YAML::Key << kind << YAML::Value << YAML::BeginMap << YAML::Key << "nvidia.com/gpu" << YAML::Value
          << YAML::DoubleQuoted << gpus << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::Key << "volumeMounts" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "dshm" << YAML::Key << "mountPath" << YAML::Value
      << "/dev/shm" << YAML::EndMap;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "config" << YAML::Key << "mountPath"
      << YAML::Value << "/etc/feedtune" << YAML::Key << "readOnly" << YAML::Value << true << YAML::EndMap;
  EmitResultsVolumeMount(out);
  out << YAML::EndSeq;
  out << YAML::EndMap << YAML::EndSeq;  // the container, containers
  out << YAML::Key << "volumes" << YAML::Value << YAML::BeginSeq;
  // A container's /dev/shm is 64 MB by default: worker loaders pass their
  // batches through shared memory and fail on it.
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "dshm" << YAML::Key << "emptyDir" << YAML::Value
      << YAML::BeginMap << YAML::Key << "medium" << YAML::Value << "Memory" << YAML::Key << "sizeLimit"
      << YAML::Value << f.shm_size << YAML::EndMap << YAML::EndMap;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "config" << YAML::Key << "configMap" << YAML::Value
      << YAML::BeginMap << YAML::Key << "name" << YAML::Value << f.name + "-config" << YAML::EndMap << YAML::EndMap;
  EmitResultsVolume(out, f.pvc);
  out << YAML::EndSeq;
  out << YAML::EndMap << YAML::EndMap;  // pod spec, template
  out << YAML::EndMap << YAML::EndMap;  // job spec, job
  return out.c_str();
}

std::string MergeJobYaml(const K8sFleet& f, const std::string& script) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "batch/v1";
  out << YAML::Key << "kind" << YAML::Value << "Job";
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << f.name + "-merge";
  EmitLabels(out, "feedtune/fleet-merge", f.name);
  out << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "backoffLimit" << YAML::Value << 1;
  // The merge waits for the sweeps (merge-wait), then needs minutes, not hours.
  out << YAML::Key << "activeDeadlineSeconds" << YAML::Value << f.merge_wait_s + 3600;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  EmitLabels(out, "feedtune/fleet-merge", f.name);
  out << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "restartPolicy" << YAML::Value << "Never";
  out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "merge";
  out << YAML::Key << "image" << YAML::Value << f.image;
  out << YAML::Key << "command" << YAML::Value << YAML::BeginSeq << "/bin/sh" << "-c" << YAML::Literal << script
      << YAML::EndSeq;
  out << YAML::Key << "volumeMounts" << YAML::Value << YAML::BeginSeq;
  EmitResultsVolumeMount(out);
  out << YAML::EndSeq;
  out << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "volumes" << YAML::Value << YAML::BeginSeq;
  EmitResultsVolume(out, f.pvc);
  out << YAML::EndSeq;
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  return out.c_str();
}

int RunFleetK8s(const Args& args) {
  po::options_description options("Options");
  std::string config_path;
  K8sFleet f;
  options.add_options()("help,h", "this help")                                                       //
      ("config", po::value(&config_path)->required(), "the sweep config (YAML); goes into a ConfigMap")  //
      ("nodes", po::value(&f.nodes)->required(), "number of nodes: completions = parallelism = N")     //
      ("image", po::value(&f.image)->required(), "container image with feedtune and /bin/sh")         //
      ("results-pvc", po::value(&f.pvc)->required(), "PersistentVolumeClaim for the results (ReadWriteMany)")
      ("gpus-per-node", po::value(&f.gpus_per_node)->default_value(0), "nvidia.com/gpu per pod (0: none)")
      ("shm-size", po::value(&f.shm_size)->default_value("8Gi"), "size limit of the memory-backed /dev/shm")
      ("name", po::value(&f.name)->default_value("feedtune-fleet"), "name of the Job (and prefix of the others)")
      ("feedtune", po::value(&f.feedtune)->default_value("feedtune"), "feedtune in the image")  //
      ("merge-wait", po::value(&f.merge_wait_s)->default_value(86400),
       "seconds the merge Job waits for every index to report before merging what there is");
  int code = kExitOk;
  const auto vm = Parse(args, options, {}, kK8sUsage, &code);
  if (!vm) return code;
  if (f.nodes < 1 || f.nodes > 100000) {
    std::cerr << "feedtune: --nodes must be between 1 and 100000 (an Indexed Job's limit), got " << f.nodes << "\n";
    return kExitUsage;
  }
  if (f.gpus_per_node < 0 || f.merge_wait_s < 0) {
    std::cerr << "feedtune: --gpus-per-node and --merge-wait must be 0 or more\n";
    return kExitUsage;
  }
  if (!ValidName(f.name) || !ValidName(f.pvc)) {
    std::cerr << "feedtune: --name '" << f.name << "' and --results-pvc '" << f.pvc
              << "' must be Kubernetes names: lowercase letters, digits and '-', starting and ending with a letter "
                 "or digit, at most 40 characters\n";
    return kExitUsage;
  }
  if (!ValidQuantity(f.shm_size)) {
    std::cerr << "feedtune: --shm-size '" << f.shm_size
              << "' is not a Kubernetes quantity; write it as e.g. 8Gi, 512Mi or 16G\n";
    return kExitUsage;
  }
  if (f.image.empty() || f.image.find_first_of(" \t\n") != std::string::npos) {
    std::cerr << "feedtune: --image '" << f.image << "' must be an image reference without spaces\n";
    return kExitUsage;
  }
  config_path = ResolveDataPath(config_path);  // a ready config of an installed feedtune: its installed path
  if (!ConfigLoads(config_path)) return kExitUsage;
  std::ifstream config_file(config_path);
  std::stringstream config_text;
  config_text << config_file.rdbuf();
  f.config_text = config_text.str();

  const std::map<std::string, std::string> values = {
      {"nodes", std::to_string(f.nodes)},
      {"results_q", "/results"},
      {"config_q", "/etc/feedtune/config.yaml"},
      {"feedtune_q", ShellQuote(f.feedtune)},
      {"wait_s", std::to_string(f.merge_wait_s)},
  };
  std::cout << "# Generated by `" << CommandLine("k8s", args) << "` (feedtune " << BuildString() << ").\n"
            << "# kubectl apply -f THIS_FILE; results in the volume of PVC " << f.pvc
            << ": sweep-NODE-taskINDEX.db, then fleet.db, fleet.html and fleet-summary.txt from the merge Job.\n"
            << "---\n"
            << ConfigMapYaml(f.name, f.config_text) << "\n---\n"
            << SweepJobYaml(f, Fill(fleet_templates::kK8sSweep, values)) << "\n---\n"
            << MergeJobYaml(f, Fill(fleet_templates::kFleetMerge, values)) << "\n";
  return kExitOk;
}

}  // namespace

int RunFleet(const Args& args) {
  const std::string scheduler = args.empty() ? "" : args[0];
  const Args rest(args.empty() ? args.end() : args.begin() + 1, args.end());
  if (scheduler == "slurm") return RunFleetSlurm(rest);
  if (scheduler == "k8s" || scheduler == "kubernetes") return RunFleetK8s(rest);
  if (scheduler == "-h" || scheduler == "--help") {
    std::cout << kFleetUsage << "\n";
    return kExitOk;
  }
  std::cerr << "feedtune: fleet needs a scheduler, slurm or k8s"
            << (scheduler.empty() ? std::string() : ", got '" + scheduler + "'") << "\n\n"
            << kFleetUsage << "\n";
  return kExitUsage;
}

}  // namespace feedtune::cli
