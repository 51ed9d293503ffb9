// `feedtune compare` and `feedtune merge`: results of many machines, read side
// by side from several files, or gathered into one.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/merge.h"
#include "results/store.h"
#include "tuner/cli/cli_util.h"

namespace feedtune::cli {
namespace {

constexpr const char* kCompareUsage = R"(Usage: feedtune compare [--db FILE ...] [--workload NAME] [--format table|json|html]

Puts machines side by side: for each workload (name and hash) one row per
machine, from its latest run that found a best setting: knee, best config,
best samples/s, speedup over the baseline, GPU idle at the best, backend and
date. Give --db once per results file (machines gathered with `feedtune merge`
or copied from each box); a run found in several files counts once.
A `feedtune layout` workload shows the layouts of each host side by side
instead: a row per candidate, a column per host (cold samples/s at its
workers, * where the host named it), then what each host named and why.

Examples:
  feedtune compare
  feedtune compare --db box-a.db --db box-b.db --workload quickstart
  feedtune compare --db fleet.db --format html > fleet.html)";

constexpr const char* kMergeUsage = R"(Usage: feedtune merge OUT.db IN.db [IN.db ...] [--keep-going]
       feedtune merge OUT.db --from LIST [--keep-going]    (LIST: one path per line; - reads stdin)
       feedtune merge OUT.db DIR [--keep-going]            (every *.db file in DIR, in name order)

Copies the runs of every input (with their machines, trials and repeats)
into OUT, creating it when missing. Machines keep their identity (hash) and
label; runs are matched by their uid, so merging the same file again adds
nothing, and a run copied while it was still running is replaced once it has
finished. A fleet's thousands of files go in a --from list or a folder: no
command line is long enough for them.

Every input is checked before OUT is touched (readable, SQLite, feedtune's,
a schema this feedtune reads); then each is opened, copied and closed before
the next, so the merge holds one input open whatever their number. The
inputs are only read, and opened read-only and immutable: nothing is created
beside them, and a folder on a read-only share merges. A file with a -wal
beside it (a sweep still writing it) is read through SQLite's locks, up to
its last commit (docs/fleets.md).

--keep-going leaves out an input that cannot be merged, naming it and why,
merges the others, and exits 1 at the end when any was left out.

Examples:
  feedtune merge fleet.db box-a.db box-b.db
  find /shared/sweeps -name '*.db' | feedtune merge fleet.db --from -
  feedtune merge fleet.db /shared/sweeps)";

// The inputs of a merge: the paths named, a folder's *.db files in name
// order, and the --from list's lines (empty ones skipped).
std::optional<std::vector<std::string>> MergeInputs(const std::vector<std::string>& named, const std::string& from,
                                                    std::string* error) {
  std::vector<std::string> inputs;
  for (const std::string& path : named) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      inputs.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      if (entry.path().extension() == ".db" && !entry.is_directory(ec)) found.push_back(entry.path().string());
    }
    if (ec) {
      *error = path + ": cannot list the folder: " + ec.message();
      return std::nullopt;
    }
    std::sort(found.begin(), found.end());
    inputs.insert(inputs.end(), found.begin(), found.end());
  }
  if (from.empty()) return inputs;
  std::ifstream file;
  if (from != "-") {
    file.open(from);
    if (!file) {
      *error = "--from " + from + ": cannot read the list: " + std::strerror(errno);
      return std::nullopt;
    }
  }
  std::istream& list = from == "-" ? std::cin : file;
  for (std::string line; std::getline(list, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) inputs.push_back(line);
  }
  return inputs;
}

}  // namespace

int RunCompare(const Args& args) {
  po::options_description options("Options");
  std::vector<std::string> db_paths;
  std::string workload, format;
  options.add_options()("help,h", "this help")(
      "db", po::value(&db_paths)->composing(),
      (std::string("results file (SQLite); repeat for several (default ") + kDefaultDb + ")").c_str())(
      "workload", po::value(&workload), "only this workload (its name)")(
      "format", po::value(&format)->default_value("table"), "table | json | html");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kCompareUsage, &code);
  if (!vm) return code;
  if (format != "table" && format != "json" && format != "html") {
    std::cerr << "feedtune: --format must be table, json or html, got '" << format << "'\n";
    return kExitUsage;
  }
  if (db_paths.empty()) db_paths.push_back(kDefaultDb);
  try {
    std::vector<results::Store> stores;
    stores.reserve(db_paths.size());
    for (const std::string& path : db_paths) stores.push_back(results::Store::OpenReadOnly(path));
    std::vector<const results::Store*> pointers;
    for (const results::Store& store : stores) pointers.push_back(&store);
    const std::vector<results::CompareRow> rows = results::CollectCompareRows(
        pointers, workload.empty() ? std::nullopt : std::optional<std::string>(workload));
    if (rows.empty() && !workload.empty()) {
      std::cerr << "feedtune: no runs of workload '" << workload
                << "' in the results files given; drop --workload to see every workload\n";
      return kExitFailure;
    }
    std::cout << (format == "json"   ? results::RenderCompareJson(rows)
                  : format == "html" ? results::RenderCompareHtml(rows)
                                     : results::RenderCompareTable(rows));
    return kExitOk;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  }
}

int RunMerge(const Args& args) {
  po::options_description options("Options");
  std::vector<std::string> paths;
  std::string from;
  options.add_options()("help,h", "this help")("files", po::value(&paths)->composing(),
                                               "OUT.db followed by the inputs (files or folders)")(
      "from", po::value(&from), "read the inputs from LIST, one path per line (- for stdin)")(
      "keep-going", "leave out an input that cannot be merged, merge the others, exit 1 at the end");
  po::positional_options_description positional;
  positional.add("files", -1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kMergeUsage, &code);
  if (!vm) return code;
  const bool keep_going = vm->count("keep-going") > 0;
  if (paths.empty() || (paths.size() < 2 && from.empty())) {
    std::cerr << "feedtune: merge needs OUT.db and at least one input\n\n" << kMergeUsage << "\n";
    return kExitUsage;
  }
  const std::string out_path = paths.front();
  std::string error;
  const auto listed = MergeInputs(std::vector<std::string>(paths.begin() + 1, paths.end()), from, &error);
  if (!listed) {
    std::cerr << "feedtune: merge: " << error << "\n";
    return kExitUsage;
  }
  if (listed->empty()) {
    std::cerr << "feedtune: merge: no inputs (an empty list or a folder without .db files)\n";
    return kExitUsage;
  }
  // Every input is checked before OUT is created, so a wrong path leaves no
  // empty OUT behind, and a bad file stops the merge before it writes.
  std::vector<std::string> inputs;
  std::vector<std::string> left_out;
  const auto leave_out = [&](const std::string& why) {
    std::cerr << "feedtune: merge: " << why << (keep_going ? " (left out)" : "") << "\n";
    left_out.push_back(why);
  };
  std::error_code ec;
  const bool out_exists = std::filesystem::exists(out_path, ec);
  for (const std::string& path : *listed) {
    // Merging a file into itself would read and write one file through two
    // connections; it could add nothing anyway.
    if (path == out_path || (out_exists && std::filesystem::equivalent(path, out_path, ec))) {
      std::cerr << "feedtune: merge: " << path << " is the output file itself; name it once, as OUT.db\n";
      return kExitUsage;
    }
    try {
      results::CheckMergeInput(path);
      inputs.push_back(path);
    } catch (const results::StoreError& e) {
      leave_out(e.what());
      if (!keep_going) return kExitFailure;
    }
  }
  try {
    results::Store out = results::Store::Open(out_path);
    results::Merger merger(out);
    results::MergeStats total;
    size_t merged = 0;
    for (const std::string& path : inputs) {
      results::MergeStats stats;
      try {
        // Opened, copied and closed before the next: one input's descriptor at a time.
        const results::Store in = results::OpenMergeInput(path);
        stats = merger.Add(in);
      } catch (const results::StoreError& e) {
        if (keep_going) {
          leave_out(e.what());
          continue;
        }
        merger.Commit();
        std::cerr << "feedtune: merge: " << e.what() << "\nfeedtune: merge: the " << merged
                  << " input(s) before it are merged into " << out_path
                  << "; merge again without it (runs already there are skipped)\n";
        return kExitFailure;
      }
      ++merged;
      std::cout << path << ": runs added " << stats.runs_added << " (trials " << stats.trials_added
                << "), updated " << stats.runs_updated << ", already there " << stats.runs_skipped
                << "; new machines " << stats.machines_added;
      // Training jobs' observed runs (feedtune observe); said only when there are any.
      if (stats.observed_added > 0) std::cout << "; observed runs " << stats.observed_added;
      std::cout << "\n";
      total.runs_added += stats.runs_added;
      total.runs_updated += stats.runs_updated;
      total.machines_added += stats.machines_added;
    }
    merger.Commit();
    std::cout << "merged into " << out_path << ": runs added " << total.runs_added << ", updated "
              << total.runs_updated << "; new machines " << total.machines_added;
    if (!left_out.empty()) std::cout << "; " << left_out.size() << " input(s) left out";
    std::cout << "\n";
    return left_out.empty() ? kExitOk : kExitFailure;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: merge: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace feedtune::cli
