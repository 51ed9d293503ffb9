// End to end: report, compare, merge and export as a user runs them, on the
// fixture DB, on files written through the store, and on a real labelled sweep.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "results/store.h"
#include "results_test_util.h"

namespace feedtune::results {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::RunShell;
using testing::SourceDir;
using testing::TempDir;
using testing::WriteFile;

class ResultsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = dir_ / "v1.db";
    std::filesystem::copy_file(SourceDir() + "/tests/testdata/db/v1.db", fixture_);
  }
  testing::CommandResult Feedtune(const std::string& args) {
    return RunShell(std::string(FEEDTUNE_BINARY) + " " + args, dir_);
  }
  TempDir dir_;
  std::string fixture_;
};

TEST_F(ResultsCliTest, ReportInEveryFormat) {
  const auto table = Feedtune("report --db " + fixture_);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("knee:     1 worker (6631.5 samples/s)"), std::string::npos) << table.out;

  const auto out = Feedtune("report --db " + fixture_ + " --run 1 --format json");
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_EQ(json::parse(out.out)["best"]["config"]["num_workers"], 1);

  const std::string html = dir_ / "report.html";
  const auto page = Feedtune("report --db " + fixture_ + " --format html --out " + html);
  ASSERT_EQ(page.code, 0) << page.err;
  EXPECT_TRUE(page.out.empty());
  EXPECT_EQ(ReadFile(html).rfind("<!DOCTYPE html>", 0), 0u);

  const auto bad = Feedtune("report --db " + fixture_ + " --format pdf");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--format must be table, json or html, got 'pdf'"), std::string::npos);
  const auto missing = Feedtune("report --db " + fixture_ + " --run 99");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("no run 99 in " + fixture_), std::string::npos) << missing.err;
  const auto unwritable = Feedtune("report --db " + fixture_ + " --out " + (dir_ / "no/such/dir/r.txt"));
  EXPECT_EQ(unwritable.code, 1);
  EXPECT_NE(unwritable.err.find("cannot write"), std::string::npos) << unwritable.err;
}

TEST_F(ResultsCliTest, ReportReadsAV1FileWithoutUpgradingIt) {
  const std::string before = ReadFile(fixture_);
  ASSERT_EQ(Feedtune("report --db " + fixture_).code, 0);
  EXPECT_EQ(ReadFile(fixture_), before);
}

TEST_F(ResultsCliTest, ExportInEveryFormat) {
  const auto torch = Feedtune("export --db " + fixture_ + " --format torch --out " +
                              (dir_ / "feedtune_settings.py"));
  ASSERT_EQ(torch.code, 0) << torch.err;
  const auto compiled = RunShell("/usr/bin/python3 -m py_compile " + (dir_ / "feedtune_settings.py"), dir_);
  EXPECT_EQ(compiled.code, 0) << compiled.err;

  const auto as_json = Feedtune("export --db " + fixture_ + " --format json");
  ASSERT_EQ(as_json.code, 0) << as_json.err;
  EXPECT_EQ(json::parse(as_json.out)["num_workers"], 1);
  const auto yaml = Feedtune("export --db " + fixture_ + " --format yaml");
  ASSERT_EQ(yaml.code, 0);
  EXPECT_NE(yaml.out.find("\nnum_workers: 1\n"), std::string::npos) << yaml.out;
  const auto env = Feedtune("export --db " + fixture_ + " --run latest --format env");
  ASSERT_EQ(env.code, 0);
  EXPECT_NE(env.out.find("\nFEEDTUNE_NUM_WORKERS=1\n"), std::string::npos) << env.out;

  const auto bad = Feedtune("export --db " + fixture_ + " --format toml");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--format must be torch, json, yaml or env, got 'toml'"), std::string::npos);
  EXPECT_EQ(Feedtune("export --db " + fixture_ + " --run zero").code, 2);
}

TEST_F(ResultsCliTest, ExportOfARunWithoutBestFails) {
  const std::string path = dir_ / "running.db";
  {
    Store store = Store::Open(path);
    RunRecord run;
    run.machine_id = store.UpsertMachine(testing::Machine("h", "l", 2));
    run.workload_name = "w";
    run.id = store.BeginRun(run);
  }
  const auto result = Feedtune("export --db " + path);
  EXPECT_EQ(result.code, 1);
  EXPECT_NE(result.err.find(path + ": run 1 (running) has no best setting to export"),
            std::string::npos)
      << result.err;
}

TEST_F(ResultsCliTest, CompareAndMergeTwoLabelledMachines) {
  const std::string a = dir_ / "a.db";
  const std::string b = dir_ / "b.db";
  {
    Store store = Store::Open(a);
    testing::WriteSweep(store, testing::Machine("host-a", "lab-a", 4), "quickstart", 1.0);
  }
  {
    Store store = Store::Open(b);
    testing::WriteSweep(store, testing::Machine("host-b", "lab-b", 16), "quickstart", 2.0);
  }
  const auto table = Feedtune("compare --db " + a + " --db " + b);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("workload quickstart (hash hash-of-quickstart): 2 hosts in 2 classes"),
            std::string::npos)
      << table.out;
  EXPECT_LT(table.out.find("lab-b"), table.out.find("lab-a")) << table.out;

  const auto as_json = Feedtune("compare --db " + a + " --db " + b + " --format json");
  ASSERT_EQ(as_json.code, 0);
  EXPECT_EQ(json::parse(as_json.out)["workloads"][0]["machines"].size(), 2u);
  const auto html = Feedtune("compare --db " + a + " --db " + b + " --format html");
  ASSERT_EQ(html.code, 0);
  EXPECT_NE(html.out.find("lab-a"), std::string::npos);
  const auto none = Feedtune("compare --db " + a + " --workload nope");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("no runs of workload 'nope'"), std::string::npos) << none.err;

  const std::string fleet = dir_ / "fleet.db";
  const auto first = Feedtune("merge " + fleet + " " + a + " " + b);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("merged into " + fleet + ": runs added 2, updated 0; new machines 2"),
            std::string::npos)
      << first.out;
  const auto second = Feedtune("merge " + fleet + " " + a + " " + b);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("merged into " + fleet + ": runs added 0, updated 0; new machines 0"),
            std::string::npos)
      << second.out;
  const auto merged = Feedtune("compare --db " + fleet + " --format json");
  ASSERT_EQ(merged.code, 0);
  // One file or two, the same answer (only where each run was read from differs).
  json from_fleet = json::parse(merged.out);
  json from_two = json::parse(as_json.out);
  for (json* out : {&from_fleet, &from_two}) {
    for (json& machine : (*out)["workloads"][0]["machines"]) machine.erase("run");
  }
  EXPECT_EQ(from_fleet, from_two);
}

// A `feedtune layout` run on each of two boxes: `report` of one as the
// layout table, JSON and page; `compare` of both as their layouts side by side.
TEST_F(ResultsCliTest, LayoutRunsInReportAndCompare) {
  const std::string a = dir_ / "a.db";
  const std::string b = dir_ / "b.db";
  const std::string why = "tar, 16 shards, streamed: the fastest cold";
  {
    Store store = Store::Open(a);
    testing::WriteLayoutRun(store, testing::Machine("host-a", "lab-a", 4),
                            testing::ScriptedLayoutAnswer("host-a", 1.0, "tar, 16 shards, streamed", why));
  }
  {
    Store store = Store::Open(b);
    testing::WriteLayoutRun(store, testing::Machine("host-b", "lab-b", 16),
                            testing::ScriptedLayoutAnswer("host-b", 2.0, "npy", "npy: the fastest cold"),
                            "2024-05-02T10:00:00Z");
  }
  const auto table = Feedtune("report --db " + a + " --run 1");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("\n*tar, 16 shards, streamed        1      18530 (17543-18744)  27709   297 MB   1.0x"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("\nnamed: " + why + "\n"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\nhost:     lab-a, Test CPU 4c, 4 of 8 CPUs usable\n"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("status / decision"), std::string::npos) << table.out;  // not a sweep's trials table

  const auto as_json = Feedtune("report --db " + a + " --run 1 --format json");
  ASSERT_EQ(as_json.code, 0) << as_json.err;
  const json report = json::parse(as_json.out);
  EXPECT_EQ(report.at("layout").at("named"), "tar, 16 shards, streamed");
  EXPECT_EQ(report.at("layout").at("candidates").size(), 5u);
  EXPECT_EQ(report.at("best").at("samples_per_s"), 18530);

  const std::string page = dir_ / "a.html";
  const auto html = Feedtune("report --db " + a + " --run 1 --format html --out " + page);
  ASSERT_EQ(html.code, 0) << html.err;
  const std::string text = ReadFile(page);
  EXPECT_NE(text.find("<svg class=\"chart layouts\""), std::string::npos);
  EXPECT_NE(text.find("data-name=\"tar, 16 shards, streamed\" data-named=\"true\""), std::string::npos);

  const auto compare = Feedtune("compare --db " + a + " --db " + b);
  ASSERT_EQ(compare.code, 0) << compare.err;
  EXPECT_NE(compare.out.find("workload layout train.npy (hash hash-of-layout): 2 hosts in 2 classes\n"),
            std::string::npos)
      << compare.out;
  EXPECT_NE(compare.out.find("layout                           lab-b         lab-a\n"), std::string::npos)
      << compare.out;
  EXPECT_NE(compare.out.find("\ntar, 16 shards, streamed    37060 at 1   *18530 at 1\n"), std::string::npos)
      << compare.out;
  EXPECT_NE(compare.out.find("\nnpy                        *32000 at 2    16000 at 2\n"), std::string::npos)
      << compare.out;
  EXPECT_NE(compare.out.find("\nlab-b: npy: the fastest cold\n"), std::string::npos) << compare.out;
  EXPECT_EQ(compare.out.find("best config"), std::string::npos) << compare.out;  // instead of the generic rows

  const auto compare_json = Feedtune("compare --db " + a + " --db " + b + " --format json");
  ASSERT_EQ(compare_json.code, 0) << compare_json.err;
  const json workload = json::parse(compare_json.out).at("workloads").at(0);
  EXPECT_EQ(workload.at("machines").size(), 2u);  // the generic keys stay
  EXPECT_EQ(workload.at("layout").at("hosts")[0].at("named"), "npy");
  EXPECT_EQ(workload.at("layout").at("hosts")[1].at("named"), "tar, 16 shards, streamed");
  EXPECT_EQ(workload.at("layout").at("candidates")[4].at("cold")[0].at("samples_per_s"), 32000);

  const auto compare_html = Feedtune("compare --db " + a + " --db " + b + " --format html");
  ASSERT_EQ(compare_html.code, 0) << compare_html.err;
  EXPECT_NE(compare_html.out.find("<table class=\"compare layouts\">"), std::string::npos);
  EXPECT_NE(compare_html.out.find("<td class=\"n named\" data-host=\"lab-b\" data-samples-per-s=\"32000\""),
            std::string::npos);
}

TEST_F(ResultsCliTest, MergeRefusesBadInputsAndLeavesThemAlone) {
  const std::string foreign = dir_ / "notes.txt";
  WriteFile(foreign, "not a database\n");
  const std::string fleet = dir_ / "fleet.db";
  const auto result = Feedtune("merge " + fleet + " " + foreign);
  EXPECT_EQ(result.code, 1);
  EXPECT_NE(result.err.find(foreign + ": not a feedtune results file"), std::string::npos)
      << result.err;
  EXPECT_EQ(ReadFile(foreign), "not a database\n");
  EXPECT_FALSE(std::filesystem::exists(fleet)) << "nothing created when an input is bad";

  EXPECT_EQ(Feedtune("merge " + fleet).code, 2);
  const auto self = Feedtune("merge " + fixture_ + " " + fixture_);
  EXPECT_EQ(self.code, 2);
  EXPECT_NE(self.err.find("is the output file itself"), std::string::npos) << self.err;
}

// `count` hosts' results files in `folder`: one written through the store,
// copied, each copy's run given a uid and host of its own (as a fleet's
// sweeps are). Returns their paths.
std::vector<std::string> WriteFleetFiles(const std::filesystem::path& folder, int count) {
  std::filesystem::create_directories(folder);
  const std::string first = (folder / "node-0000.db").string();
  {
    Store store = Store::Open(first);
    testing::WriteSweep(store, testing::Machine("node-0000", "node-0000", 8), "quickstart", 1.0);
  }
  std::vector<std::string> paths = {first};
  for (int i = 1; i < count; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%04d", i);
    const std::string path = (folder / (std::string(name) + ".db")).string();
    std::filesystem::copy_file(first, path);
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql = std::string("PRAGMA synchronous = OFF; UPDATE runs SET uid = uid || '") + name +
                            "', host_name = '" + name + "'; UPDATE machines SET hash = hash || '" + name + "', hostname = '" +
                            name + "', label = '" + name + "'";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    paths.push_back(path);
  }
  return paths;
}

// A fleet's merge under a low open-file limit: 2,000 inputs from a list
// under ulimit -n 256 (each input is closed before the next), and nothing
// appears beside them.
TEST_F(ResultsCliTest, MergesTwoThousandInputsUnderUlimit256) {
  const std::filesystem::path hosts = dir_.path() / "hosts";
  const std::vector<std::string> paths = WriteFleetFiles(hosts, 2000);
  const std::string list = dir_ / "inputs.txt";
  {
    std::ofstream out(list);
    for (const std::string& path : paths) out << path << "\n";
  }
  const std::string fleet = dir_ / "fleet.db";
  const auto started = std::chrono::steady_clock::now();
  const auto merged =
      RunShell("ulimit -n 256 && " + std::string(FEEDTUNE_BINARY) + " merge " + fleet + " --from " + list, dir_);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(merged.code, 0) << merged.err.substr(0, 2000);
  EXPECT_NE(merged.out.find("merged into " + fleet + ": runs added 2000, updated 0; new machines 2000"),
            std::string::npos)
      << merged.out.substr(merged.out.size() > 500 ? merged.out.size() - 500 : 0);
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(hosts)) ++files;
  EXPECT_EQ(files, 2000u) << "merge created files beside its inputs";
  std::printf("[ figures  ] merge of 2000 inputs under ulimit -n 256: %.2f s\n", seconds);
}

TEST_F(ResultsCliTest, MergeTakesAListStdinOrAFolderAndKeepsGoingPastABadFile) {
  const std::filesystem::path hosts = dir_.path() / "hosts";
  const std::vector<std::string> paths = WriteFleetFiles(hosts, 3);
  const std::string list = dir_ / "inputs.txt";
  WriteFile(list, paths[0] + "\n\n" + paths[1] + "\r\n" + paths[2] + "\n");  // blank lines and CRLF too
  const auto from_list = Feedtune("merge " + (dir_ / "a.db") + " --from " + list);
  ASSERT_EQ(from_list.code, 0) << from_list.err;
  EXPECT_NE(from_list.out.find(": runs added 3, updated 0; new machines 3"), std::string::npos) << from_list.out;
  const auto from_stdin = RunShell("cat " + list + " | " + FEEDTUNE_BINARY + " merge " + (dir_ / "b.db") +
                                       " --from -",
                                   dir_);
  ASSERT_EQ(from_stdin.code, 0) << from_stdin.err;
  EXPECT_NE(from_stdin.out.find(": runs added 3, updated 0; new machines 3"), std::string::npos) << from_stdin.out;
  const auto from_folder = Feedtune("merge " + (dir_ / "c.db") + " " + hosts.string());
  ASSERT_EQ(from_folder.code, 0) << from_folder.err;
  EXPECT_LT(from_folder.out.find(paths[0]), from_folder.out.find(paths[2])) << "in name order";
  EXPECT_NE(from_folder.out.find(": runs added 3, updated 0; new machines 3"), std::string::npos)
      << from_folder.out;

  // A file that is not a results file, in the folder: refused by name, before
  // anything is written; with --keep-going, left out and the others merged.
  WriteFile((hosts / "notes.db").string(), std::string(200, 'x'));
  const auto refused = Feedtune("merge " + (dir_ / "d.db") + " " + hosts.string());
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(refused.err, "feedtune: merge: " + (hosts / "notes.db").string() +
                             ": not a feedtune results file (not an SQLite database); leave it out of the merge\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "d.db"));
  const auto kept_going = Feedtune("merge " + (dir_ / "d.db") + " " + hosts.string() + " --keep-going");
  EXPECT_EQ(kept_going.code, 1);
  EXPECT_NE(kept_going.err.find("notes.db: not a feedtune results file (not an SQLite database); leave it out of "
                                "the merge (left out)\n"),
            std::string::npos)
      << kept_going.err;
  EXPECT_NE(kept_going.out.find(": runs added 3, updated 0; new machines 3; 1 input(s) left out"), std::string::npos)
      << kept_going.out;

  EXPECT_EQ(Feedtune("merge " + (dir_ / "e.db") + " --from " + (dir_ / "no-such-list.txt")).code, 2);
  EXPECT_EQ(Feedtune("merge " + (dir_ / "e.db") + " " + (dir_ / "empty-folder")).code, 1);  // no such file
}

TEST_F(ResultsCliTest, SweepLabelNamesTheMachineInCompare) {
  const std::string config = dir_ / "tiny.yaml";
  WriteFile(config, R"(name: tiny-label
workload: {kind: synthetic, samples: 128, sample_bytes: 1024, cpu_us_per_sample: 50}
loader: {batch_size: 16}
device: {backend: host-sim, step_us: 1000}
sweep: {max_workers: 1, prefetch_factors: [2], repeats: 1, warmup_batches: 1, measure_seconds: 0.05}
)");
  const std::string db = dir_ / "label.db";
  const auto sweep = Feedtune("sweep " + config + " --db " + db + " --label my-lab-box -q");
  ASSERT_EQ(sweep.code, 0) << sweep.err;
  const auto compare = Feedtune("compare --db " + db + " --format json");
  ASSERT_EQ(compare.code, 0) << compare.err;
  const json out = json::parse(compare.out);
  EXPECT_EQ(out["workloads"][0]["name"], "tiny-label");
  EXPECT_EQ(out["workloads"][0]["machines"][0]["label"], "my-lab-box");
  const auto report = Feedtune("report --db " + db + " --format json");
  EXPECT_EQ(json::parse(report.out)["machine"]["label"], "my-lab-box");
}

// The issue's case, as a user meets it: two sweeps on one machine under two
// labels are two hosts of one class; `export --machine this` then picks this
// host's run, and `check` finds nothing wrong with two hosts.
TEST_F(ResultsCliTest, TwoLabelsOnOneBoxAreTwoHostsAndExportPicksThisHost) {
  const std::string config = dir_ / "tiny.yaml";
  WriteFile(config, R"(name: tiny-fleet
workload: {kind: synthetic, samples: 128, sample_bytes: 1024, cpu_us_per_sample: 50}
loader: {batch_size: 16}
device: {backend: host-sim, step_us: 1000}
sweep: {max_workers: 1, prefetch_factors: [2], repeats: 1, warmup_batches: 1, measure_seconds: 0.05}
)");
  const std::string db = dir_ / "one-box.db";
  for (const char* label : {"box-a", "box-b"}) {
    const auto sweep = Feedtune("sweep " + config + " --db " + db + " --label " + label + " -q");
    ASSERT_EQ(sweep.code, 0) << sweep.err;
  }
  const auto compare = Feedtune("compare --db " + db + " --format json");
  ASSERT_EQ(compare.code, 0) << compare.err;
  const json machines = json::parse(compare.out)["workloads"][0]["machines"];
  ASSERT_EQ(machines.size(), 2u) << compare.out;
  EXPECT_EQ(machines[0]["class"], machines[1]["class"]);
  std::set<std::string> hosts = {machines[0]["host"]["name"], machines[1]["host"]["name"]};
  EXPECT_EQ(hosts, (std::set<std::string>{"box-a", "box-b"}));

  const auto env = Feedtune("export --db " + db + " --workload tiny-fleet --machine this --label box-a --format env");
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_EQ(env.out.rfind("# feedtune: for host box-a (host match): this host's latest run (run 1 of box-a", 0), 0u)
      << env.out;
  EXPECT_NE(env.out.find("FEEDTUNE_NUM_WORKERS="), std::string::npos) << env.out;
  const auto as_json = Feedtune("export --db " + db + " --workload tiny-fleet --machine this --format json");
  ASSERT_EQ(as_json.code, 0) << as_json.err;
  EXPECT_EQ(json::parse(as_json.out)["source"]["match"], "host");
  EXPECT_EQ(json::parse(as_json.out)["source"]["run"], 2) << "no label: this host's latest run";

  const auto none = Feedtune("export --db " + db + " --workload resnet50 --machine this");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find(db + ": no run of workload 'resnet50' with a best setting; the file holds: tiny-fleet "
                              "(2 runs on 2 hosts)"),
            std::string::npos)
      << none.err;
  EXPECT_EQ(Feedtune("export --db " + db + " --machine that --workload tiny-fleet").code, 2);
  EXPECT_EQ(Feedtune("export --db " + db + " --machine this").code, 2);

  const auto check = Feedtune("check --db " + db);
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("2 host/workload pairs, 0 regressions, 0 outliers"), std::string::npos) << check.out;
}

TEST_F(ResultsCliTest, CheckExitsOneOnADropBeyondTheIntervals) {
  const std::string db = dir_ / "fleet.db";
  {
    Store store = Store::Open(db);
    const Fingerprint node = testing::Machine("node", "", 16);
    const HostIdentity host{.name = "gpu-7", .hostname = "gpu-7", .machine_id = "m7"};
    testing::WriteHostRun(store, node, host, "resnet", 1000, 990, 1010, "2024-06-01T10:00:00Z");
    testing::WriteHostRun(store, node, host, "resnet", 995, 960, 1020, "2024-06-08T10:00:00Z");
  }
  const auto steady = Feedtune("check --db " + db + " --workload resnet");
  EXPECT_EQ(steady.code, 0) << steady.out << steady.err;
  {
    Store store = Store::Open(db);
    testing::WriteHostRun(store, testing::Machine("node", "", 16),
                          HostIdentity{.name = "gpu-7", .hostname = "gpu-7", .machine_id = "m7"}, "resnet", 800,
                          790, 810, "2024-06-15T10:00:00Z");
  }
  const auto dropped = Feedtune("check --db " + db + " --format json");
  EXPECT_EQ(dropped.code, 1) << dropped.err;
  const json out = json::parse(dropped.out);
  EXPECT_EQ(out["regressions"], 1);
  ASSERT_EQ(out["findings"].size(), 1u);
  EXPECT_EQ(out["findings"][0]["host"]["name"], "gpu-7");
  EXPECT_EQ(out["findings"][0]["reference"]["run"], 2);
  EXPECT_EQ(Feedtune("check --db " + db + " --workload bert").code, 1);
  EXPECT_EQ(Feedtune("check --db " + db + " --format html").code, 2);
}

}  // namespace
}  // namespace feedtune::results
