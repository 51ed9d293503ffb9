// `feedtune compare` and `feedtune merge`: results of many machines, read side
// by side from several files, or gathered into one.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "results/compare.h"
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

Examples:
  feedtune compare
  feedtune compare --db box-a.db --db box-b.db --workload quickstart
  feedtune compare --db fleet.db --format html > fleet.html)";

constexpr const char* kMergeUsage = R"(Usage: feedtune merge OUT.db IN.db [IN.db ...]

Copies the runs of every IN file (with their machines, trials and repeats)
into OUT, creating it when missing. Machines keep their identity (hash) and
label; runs are matched by their uid, so merging the same file again adds
nothing, and a run copied while it was still running is replaced once it has
finished. The IN files are only read.

Example:
  feedtune merge fleet.db box-a.db box-b.db)";

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
  options.add_options()("help,h", "this help")("files", po::value(&paths)->composing(),
                                               "OUT.db followed by the IN.db files");
  po::positional_options_description positional;
  positional.add("files", -1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kMergeUsage, &code);
  if (!vm) return code;
  if (paths.size() < 2) {
    std::cerr << "feedtune: merge needs OUT.db and at least one IN.db\n\n" << kMergeUsage << "\n";
    return kExitUsage;
  }
  const std::string& out_path = paths.front();
  // Merging a file into itself would read and write one file through two
  // connections; it could add nothing anyway.
  for (size_t i = 1; i < paths.size(); ++i) {
    std::error_code error;
    if (paths[i] == out_path || std::filesystem::equivalent(paths[i], out_path, error)) {
      std::cerr << "feedtune: merge: " << paths[i] << " is the output file itself; name it once, as OUT.db\n";
      return kExitUsage;
    }
  }
  try {
    // Inputs are opened (and so checked) before the output is created, so a
    // wrong IN path leaves no empty OUT file behind.
    std::vector<results::Store> inputs;
    for (size_t i = 1; i < paths.size(); ++i) inputs.push_back(results::Store::OpenReadOnly(paths[i]));
    results::Store out = results::Store::Open(out_path);
    results::MergeStats total;
    for (const results::Store& in : inputs) {
      const results::MergeStats stats = out.MergeFrom(in);
      std::cout << in.path() << ": runs added " << stats.runs_added << " (trials "
                << stats.trials_added << "), updated " << stats.runs_updated
                << ", already there " << stats.runs_skipped << "; new machines "
                << stats.machines_added;
      // Training jobs' observed runs (feedtune observe); said only when there are any.
      if (stats.observed_added > 0) std::cout << "; observed runs " << stats.observed_added;
      std::cout << "\n";
      total.runs_added += stats.runs_added;
      total.runs_updated += stats.runs_updated;
      total.machines_added += stats.machines_added;
    }
    std::cout << "merged into " << out_path << ": runs added " << total.runs_added
              << ", updated " << total.runs_updated << "; new machines " << total.machines_added
              << "\n";
    return kExitOk;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: merge: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace feedtune::cli
