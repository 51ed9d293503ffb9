// `feedtune observe`: a training job's figures back into the results file.
// python feedtune.watch runs it from a background thread;
// the store stays the one writer of the file, so Python never writes SQL.
#include <iostream>
#include <string>
#include <vector>

#include "results/observed.h"
#include "results/store.h"
#include "tuner/cli/cli_util.h"

namespace feedtune::cli {
namespace {

constexpr const char* kObserveUsage = R"(Usage: feedtune observe --db FILE [--record JSON] [--label NAME]

Records what a training job saw (an observed run) in a results file, so that
`feedtune check` can hold it against the sweep of the same host and config
and `feedtune report` shows it beside that sweep. python's feedtune.watch
calls this for you; call it yourself from any job that measures its loop.

Reads one JSON object per line on stdin (blank lines are skipped), or the one
object given with --record. Every record is checked before any is written;
then all of them are written in one transaction, with this machine's
fingerprint and host (the job runs observe on the machine it trains on).

Fields of a record:
%FIELDS%

The input-bound share is measured as the TensorBoard input-pipeline analyzer
does: time spent waiting for the next batch over the whole step (from one
batch handed out to the next). Bands: < 5% not input-bound, 5-20% moderately,
>= 20% highly input-bound.

Exit codes: 0 written, 1 the file cannot be written, 2 a bad record (the
message names the line, the field and what it takes; nothing is written).

Examples:
  feedtune observe --db fleet.db --record '{"config": "resnet50", "samples_per_s": 812.5,
      "input_bound_frac": 0.04, "steps": 500, "knobs": {"batch_size": 64,
      "num_workers": 4, "pin_memory": true, "prefetch_factor": 2, "persistent_workers": true}}'
  python train.py | grep '^{' | feedtune observe --db fleet.db)";

std::string Usage() {
  std::string usage = kObserveUsage;
  const std::string marker = "%FIELDS%";
  usage.replace(usage.find(marker), marker.size(), results::ObservedFieldsHelp());
  return usage;
}

// The records of stdin or --record, each checked; prints the first bad one's
// line, field and fix, and returns false.
bool ReadRecords(const std::string& record_arg, bool from_flag, std::vector<results::ObservedRecord>* records) {
  std::vector<std::string> lines;
  if (from_flag) {
    lines.push_back(record_arg);
  } else {
    for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      records->push_back(results::ParseObserved(lines[i]));
    } catch (const results::ObservedError& e) {
      const std::string where = from_flag ? "--record" : "stdin line " + std::to_string(i + 1);
      std::cerr << "feedtune observe: " << where << ": " << e.what()
                << " (nothing was written; `feedtune observe --help` lists the fields)\n";
      return false;
    }
  }
  if (records->empty()) {
    std::cerr << "feedtune observe: no record on " << (from_flag ? "--record" : "stdin")
              << "; give one JSON object per line on stdin, or --record JSON\n";
    return false;
  }
  return true;
}

}  // namespace

int RunObserve(const Args& args) {
  po::options_description options("Options");
  std::string db_path, record_arg, label;
  options.add_options()("help,h", "this help")("db", po::value(&db_path)->default_value(kDefaultDb),
                                               "results file (SQLite) to append to")(
      "record", po::value(&record_arg), "one record as a JSON object, instead of stdin")(
      "label", po::value(&label), "this host's name, as its sweeps were labelled (default: the hostname)");
  po::positional_options_description positional;
  int code = kExitOk;
  const std::string usage = Usage();
  const auto vm = Parse(args, options, positional, usage.c_str(), &code);
  if (!vm) return code;
  std::vector<results::ObservedRecord> records;
  if (!ReadRecords(record_arg, vm->count("record") > 0, &records)) return kExitUsage;
  try {
    results::Store store = results::Store::Open(db_path);
    const std::vector<int64_t> ids = store.AddObserved(MachineFingerprint(label), records);
    std::cerr << "feedtune observe: " << db_path << ": recorded " << ids.size()
              << (ids.size() == 1 ? " observed run\n" : " observed runs\n");
    return kExitOk;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune observe: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace feedtune::cli
