// `feedtune init --script tune.py`: a commented sweep config for a user's own
// training loop (feedtune.serve in tune.py), as a command workload that speaks
// the serve protocol (docs/command-protocol.md, docs/python.md).
//
// The config is written from a template, then parsed with the same parser as
// `feedtune validate` before anything is written: init never leaves a config
// that validate refuses.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>

#include "tuner/cli/cli_util.h"
#include "tuner/cli/install_paths.h"
#include "tuner/cli/torch_costs_probe.h"

namespace feedtune::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInitUsage = R"(Usage: feedtune init --script tune.py [--out FILE] [--python PYTHON] [--name NAME]

Writes a commented sweep config that measures YOUR training loop: the script
calls feedtune.serve(dataset=..., step=..., ...) (docs/python.md), and the
config runs it as a command workload with protocol serve, so python, torch
and your dataset are set up once and each trial builds a new DataLoader with
the trial's knobs over your step, collate_fn and sampler.

  # tune.py
  from feedtune import serve
  serve(dataset=make_dataset, step=train_step, collate_fn=my_collate, batch_size=64)

Then:
  feedtune init --script tune.py --out tune.yaml
  feedtune validate tune.yaml      # the effective config, every default filled in
  feedtune sweep tune.yaml         # measure; then `feedtune export` for the job

loader.batch_size is taken from the script's `batch_size=N` when it has one
(else 64): it must be the batch size serve() was given, or the trials fail
saying so. The script path is written as given: run feedtune from the folder
it is relative to (or give an absolute path). python must be the interpreter
of your training environment (the one with your torch); feedtune must be
importable there: the config says where this binary's package is (installed
beside it, or <checkout>/python for a build tree) and what PYTHONPATH names it.

The interpreter written is one that imports torch, asked before the config is
written: --python when given (refused, with the reason, when it cannot), else
python3 on PATH, else /usr/bin/python3 (Debian's, where python3-torch
installs); init says which it chose and refuses when none can.

Without --out the config is printed on stdout. An existing --out file is
left alone (exit 2) unless --force.)";

// `batch_size=64` in the script (serve's argument, or a DataLoader's), or 0.
int BatchSizeIn(const std::string& script_text) {
  static const std::regex kBatch(R"(batch_size\s*=\s*([0-9]+))");
  std::smatch match;
  if (!std::regex_search(script_text, match, kBatch)) return 0;
  const long value = std::stol(match[1].str());
  return value >= 1 && value <= 65536 ? static_cast<int>(value) : 0;
}

// A YAML double-quoted string, so paths with spaces or colons stay one item.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The workload name: the script's stem, reduced to [A-Za-z0-9_.-].
std::string NameFor(const fs::path& script) {
  std::string name;
  for (const char c : script.stem().string()) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
    name += ok ? c : '_';
  }
  return name.empty() ? std::string("tune") : name;
}

// Where `import feedtune` finds the package this binary came with: installed
// beside it, or the checkout of a build tree.
std::string PackageComment() {
  const DataRoot& root = ThisDataRoot();
  if (root.python_dir.empty()) {
    return "  # The interpreter must import feedtune (pip install the python/ folder of feedtune's sources).\n";
  }
  const std::string where = root.installed ? "installed with this feedtune, in " : "in this feedtune's checkout, ";
  return "  # feedtune's Python package is " + where + root.python_dir + "\n  # (PYTHONPATH=" + root.python_dir +
         " for an interpreter that does not look there).\n";
}

std::string ConfigText(const std::string& script, const std::string& python, const std::string& name,
                       int batch_size, bool batch_from_script) {
  std::ostringstream out;
  out << "# " << name << ": sweeps the training loop of " << script << " (feedtune.serve), written by\n"
      << "#   feedtune init --script " << script << "\n"
      << "# Check it with `feedtune validate FILE`, run it with `feedtune sweep FILE`.\n"
      << "#\n"
      << "# protocol serve: feedtune starts the script once per sweep; python, torch and your\n"
      << "# dataset are set up once, then each trial's knobs come as one JSON request on its\n"
      << "# stdin and serve() builds a new DataLoader (new workers, as your job would) over\n"
      << "# your dataset, with your step, collate_fn and sampler (docs/command-protocol.md).\n"
      << "name: " << name << "\n"
      << "workload:\n"
      << "  kind: command\n"
      << "  protocol: serve\n"
      << "  # The interpreter of your training environment first (the one whose torch your job\n"
      << "  # uses), then the script; a relative path is taken from where you run feedtune.\n"
      << PackageComment()
      << "  # No {placeholders} here: with serve the knobs arrive per trial on stdin.\n"
      << "  argv: [" << Quoted(python) << ", " << Quoted(script) << "]\n"
      << "  timeout_s: 300                 # per trial (the first also covers the script's start)\n"
      << "loader:\n"
      << "  batch_size: " << batch_size
      << (batch_from_script ? "                 # from the script's batch_size=; keep them equal\n"
                            : "                 # must equal serve(batch_size=...) in the script\n")
      << "  # The workers' start method: default = the interpreter's (fork on Linux before\n"
      << "  # Python 3.14, forkserver from 3.14). forkserver and spawn send your Dataset to each\n"
      << "  # worker by pickling; feedtune checks that it pickles before the first trial.\n"
      << "  multiprocessing_context: default\n"
      << "device:\n"
      << "  # serve(step=...) runs your real step, so device.step_us is not used; the loop waits\n"
      << "  # for the device every N steps, as loss.item() does (0 = never).\n"
      << "  sync_every_steps: 1\n"
      << "sweep:\n"
      << "  max_workers: auto              # doubling stops earlier when gains stop\n"
      << "  prefetch_factors: [2, 4]\n"
      << "  repeats: 3                     # measured windows per trial: a real step is noisy\n"
      << "  warmup_batches: 8\n"
      << "  measure_seconds: 3.0           # long enough for some tens of your steps\n"
      << "  # Which start methods to measure (worker start-up and the epoch boundary):\n"
      << "  # auto = when the interpreter's default is not fork; or a list, e.g. [fork, spawn].\n"
      << "  start_methods: auto\n";
  return out.str();
}

// The interpreter the config runs (docs/python.md): `*python` when given,
// else python3 on PATH, else /usr/bin/python3, the first that imports torch,
// since a sweep whose interpreter lacks torch fails only at its baseline.
// Says which it chose on stderr; false (said why) when none can.
bool ChooseTorchPython(std::string* python) {
  const bool named = !python->empty();
  const std::vector<std::string> candidates =
      named ? std::vector<std::string>{*python} : std::vector<std::string>{"python3", "/usr/bin/python3"};
  std::vector<std::string> tried;
  const std::optional<TorchPython> found = FindTorchPython(candidates, &tried);
  std::string reasons;
  for (const std::string& t : tried) reasons += (reasons.empty() ? "" : "; ") + t;
  if (!found) {
    std::cerr << "feedtune init: " << (named ? "--python " : "no interpreter imports torch: ") << reasons
              << ". The sweep runs your script with it, and serve() needs torch: "
              << (named ? "name the interpreter of your training environment" : "give it with --python")
              << " (Debian: apt-get install python3-torch gives /usr/bin/python3 torch)\n";
    return false;
  }
  *python = found->interpreter;
  std::cerr << "feedtune init: the config runs " << found->interpreter << " (torch " << found->torch_version << ")"
            << (tried.empty() ? "" : "; passed over " + reasons) << "\n";
  return true;
}

}  // namespace

int RunInit(const Args& args) {
  po::options_description options("Options");
  std::string script;
  std::string out_path;
  std::string python;
  std::string name;
  options.add_options()("help,h", "this help")("script", po::value(&script)->required(),
                                               "your tune.py (it calls feedtune.serve)")(
      "out,o", po::value(&out_path), "write the config here (default: stdout)")(
      "python", po::value(&python), "the interpreter of your training environment, which must import torch (default: python3 on PATH, "
      "else /usr/bin/python3, the first that imports torch)")(
      "name", po::value(&name), "the workload name (default: the script's name)")(
      "force", "overwrite --out when it exists");
  int code = kExitOk;
  const auto vm = Parse(args, options, {}, kInitUsage, &code);
  if (!vm) return code;
  std::ifstream in(script);
  if (!in) {
    std::cerr << "feedtune init: --script " << script
              << ": cannot read it (no such file here, in " << fs::current_path().string()
              << "); give the path of your tune.py, which calls feedtune.serve(dataset=..., step=...)\n";
    return kExitUsage;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("serve") == std::string::npos) {
    std::cerr << "feedtune init: note: " << script
              << " never mentions serve; the config runs it as a serving command, so it must call "
                 "feedtune.serve(...) (docs/python.md) or speak docs/command-protocol.md itself\n";
  }
  if (!ChooseTorchPython(&python)) return kExitUsage;
  const int found_batch = BatchSizeIn(text.str());
  const std::string config_text =
      ConfigText(script, python, name.empty() ? NameFor(script) : name, found_batch > 0 ? found_batch : 64,
                 found_batch > 0);
  try {
    tuner::ParseConfig(config_text, "feedtune init");
  } catch (const tuner::ConfigError& e) {
    std::cerr << "feedtune init: the config made for " << script << " does not validate: " << e.what()
              << " (--name takes [A-Za-z0-9_.-])\n";
    return kExitUsage;
  }
  if (out_path.empty()) {
    std::cout << config_text;
    return kExitOk;
  }
  if (fs::exists(out_path) && vm->count("force") == 0) {
    std::cerr << "feedtune init: --out " << out_path << " exists; left alone (add --force to overwrite it)\n";
    return kExitUsage;
  }
  std::ofstream file(out_path);
  file << config_text;
  file.close();
  if (!file) {
    std::cerr << "feedtune init: cannot write " << out_path << "\n";
    return kExitFailure;
  }
  std::cerr << "feedtune init: wrote " << out_path << "; next: feedtune validate " << out_path
            << ", then feedtune sweep " << out_path << "\n";
  return kExitOk;
}

}  // namespace feedtune::cli
