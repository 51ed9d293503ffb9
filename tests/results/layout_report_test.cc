// A `feedtune layout` run in `report` and `compare` (results/layout_report.h),
// from a scripted answer stored as `feedtune layout` stores it: the exact
// rows, the star, the why line, a field the answer lacks shown as "-", the
// JSON report's "layout" object, the HTML chart, and two hosts side by side.
#include "results/layout_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "results/compare.h"
#include "results/report.h"
#include "results/store.h"
#include "results_test_util.h"

namespace feedtune::results {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

const std::string kWhy =
    "tar, 16 shards, streamed: the fastest cold, 18530 samples/s (17543-18744) at 1 worker; pays back after 58.6 "
    "epochs";

class LayoutReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Store store = Store::Open(dir_ / "r.db");
    testing::WriteLayoutRun(store, testing::Machine("box-a", "lab-a", 2),
                            testing::ScriptedLayoutAnswer("box-a", 1.0, "tar, 16 shards, streamed", kWhy));
    view_ = LoadRunView(store, 1);
  }
  testing::TempDir dir_;
  RunView view_;
};

TEST_F(LayoutReportTest, OnlyALayoutRunWithAnAnswerHasOne) {
  EXPECT_EQ(view_.run.kind, RunKind::kLayout);  // as stored and loaded
  EXPECT_TRUE(LayoutAnswer(view_.run).has_value());
  RunRecord sweep = view_.run;
  sweep.kind = RunKind::kSweep;  // its kind decides, not its name or what its fields hold
  EXPECT_FALSE(LayoutAnswer(sweep).has_value());
  RunRecord other_json = view_.run;
  other_json.answer_json = "{\"named\": \"npy\"}";  // JSON, but no candidates
  EXPECT_FALSE(LayoutAnswer(other_json).has_value());
  RunRecord damaged = view_.run;
  damaged.answer_json = "{\"candidates\": [";
  EXPECT_FALSE(LayoutAnswer(damaged).has_value());
}

TEST_F(LayoutReportTest, TableHasTheRowsTheStarWhyHostAndDate) {
  const std::string text = RenderTable(view_);
  const std::string expected_table =
      "layout                     workers  cold samples/s (95% CI)   warm  on disk  ampl.  convert  epoch  payback\n"
      "-----------------------------------------------------------------------------------------------------------\n"
      " as-is: npy                      4      15150 (14732-15976)  44515   295 MB   1.0x        -  0.2 s   source\n"
      "*tar, 16 shards, streamed        1      18530 (17543-18744)  27709   297 MB   1.0x    2.1 s  0.2 s     58.6\n"
      " lmdb                            0            754 (695-806)  51374   301 MB      -    2.8 s  4.0 s    never\n"
      " hdf5, chunk 32, gzip:4          -                        -      -        -      -        -      -        -\n"
      " npy                             2      16000 (15800-16200)      -   295 MB   1.0x        -  0.2 s        -\n";
  EXPECT_THAT(text, HasSubstr("\n\n" + expected_table + "\n"
                              "named: " + kWhy + "\n"
                              "not measured: hdf5, chunk 32, gzip:4: exit 1: feedtune trial: out of memory\n"
                              "note: lmdb: cache cold: 30.1 MB in 2 files evicted; 12% stayed resident\n"
                              "(on disk, convert, epoch and payback are for the whole dataset, extrapolated from "
                              "the sample)\n\n"
                              "host:     lab-a, Test CPU 2c, 2 of 4 CPUs usable\n"
                              "date:     2024-05-01T10:00:00Z, ended 2024-05-01T10:05:00Z\n"));
  EXPECT_THAT(text, HasSubstr("run:      1 (done), feedtune 0.1.0\n"
                              "workload: layout train.npy (hash hash-of-layout)\n"
                              "dataset:  /data/train.npy (npy, 10000 samples, 295 MB); a sample of 1000 samples "
                              "(29.5 MB) measured, --cpu-us-per-sample 0\n"));
  // The eviction that left nothing resident was cold as said: no note.
  EXPECT_THAT(text, Not(HasSubstr("0% stayed resident")));
  // The trials, compact: the cold doubling per candidate (a failed trial says so).
  EXPECT_THAT(text, HasSubstr("cold samples/s by num_workers (the doubling each layout was measured over; its row "
                              "above is the best):\n"
                              "layout                         0      1      2      4\n"
                              "-----------------------------------------------------\n"
                              "as-is: npy                  3030   6060   9090  15150\n"
                              "tar, 16 shards, streamed    9265  18530      -      -\n"
                              "lmdb                         754      -      -      -\n"
                              "hdf5, chunk 32, gzip:4    failed      -      -      -\n"
                              "npy                         5333  10667  16000      -\n"));
}

TEST_F(LayoutReportTest, AnAnswerWithoutItsFiguresShowsDashes) {
  RunView bare = view_;
  bare.run.answer_json = R"({"candidates": [{"name": "as-is: npy"}, {"name": "tar", "cold": {"samples_per_s": 10}}]})";
  bare.trials.clear();
  const std::string text = RenderTable(bare);
  EXPECT_THAT(text, HasSubstr("\n as-is: npy        -                        -     -        -      -        -      -"
                              "        -\n"));
  EXPECT_THAT(text, HasSubstr("\n tar               -                       10     -        -      -        -      -"
                              "        -\n"));
  EXPECT_THAT(text, HasSubstr("\nnamed: -\n"));
  EXPECT_THAT(text, HasSubstr("dataset:  - (-, - samples, -); a sample of - samples (-) measured, --cpu-us-per-sample -\n"));
  EXPECT_THAT(text, Not(HasSubstr("by num_workers")));  // no trials, no doubling
}

// An answer measured on a store: fc and requests per epoch where warm and
// read amplification stand locally, and the store's lines under the table.
TEST_F(LayoutReportTest, AStoreAnswerShowsRequestsInFlightAndRequestsPerEpoch) {
  json answer = testing::ScriptedLayoutAnswer("box-a", 1.0, "tar, 16 shards, streamed", kWhy);
  answer["candidates"][0]["fetch_concurrency"] = 16;
  answer["candidates"][0]["requests_per_epoch"] = 10000;
  answer["candidates"][1]["fetch_concurrency"] = nullptr;  // a stream's requests in flight are its workers
  answer["candidates"][1]["requests_per_epoch"] = 16;
  answer["store"] = {{"scratch", "s3://b/train.layout-scratch/"},
                     {"cold", "cold on a store: nothing of the candidates is cached on this box"},
                     {"left_out", {"lmdb, hdf5 and npy: read from local paths only"}},
                     {"local", nullptr},
                     {"local_line", "on a local disk: no answer on record"}};
  RunView on_store = view_;
  on_store.run.answer_json = answer.dump();
  const std::string text = RenderTable(on_store);
  EXPECT_THAT(text, HasSubstr(
      "layout                     workers  fc  cold samples/s (95% CI)  requests/epoch  on store  convert  epoch  payback\n"));
  EXPECT_THAT(text, HasSubstr(
      " as-is: npy                      4  16      15150 (14732-15976)           10000    295 MB        -  0.2 s   source\n"
      "*tar, 16 shards, streamed        1   -      18530 (17543-18744)              16    297 MB    2.1 s  0.2 s     58.6\n"
      " lmdb                            0   -            754 (695-806)               -    301 MB    2.8 s  4.0 s    never\n"));
  EXPECT_THAT(text, HasSubstr("named: " + kWhy + "\non a local disk: no answer on record\n"));
  EXPECT_THAT(text, HasSubstr("cold on a store: nothing of the candidates is cached on this box\n"
                              "not a candidate: lmdb, hdf5 and npy: read from local paths only\n"
                              "(requests, on store, convert, epoch and payback are for the whole dataset"));
  EXPECT_THAT(RenderHtml(on_store), HasSubstr("requests/epoch"));
}

// A note is shown by its number, never by its words: a cache under half a
// percent resident was cold as said; one not counted (a store's objects, a
// window that read its sample warm) always shows; an answer stored before the
// notes had fields shows its words as they are.
TEST(LayoutCacheNotes, ShownByTheResidentShareNotByTheirWords) {
  const nlohmann::ordered_json answer = nlohmann::ordered_json::parse(R"({"cache_notes": [
      {"candidate": "npy", "note": "cache cold: 1 file evicted; 0% stayed resident", "resident_fraction": 0.0049},
      {"candidate": "lmdb", "note": "cache cold: words that do not say 0% stayed resident", "resident_fraction": 0.005},
      {"candidate": "tar", "note": "a cold window read the sample 1.30 times", "resident_fraction": null},
      "hdf5: cache cold: an older answer's note; 0% stayed resident"]})");
  EXPECT_THAT(CacheNoteLines(answer),
              ::testing::ElementsAre("note: lmdb: cache cold: words that do not say 0% stayed resident",
                                   "note: tar: a cold window read the sample 1.30 times",
                                   "note: hdf5: cache cold: an older answer's note; 0% stayed resident"));
  EXPECT_THAT(CacheNoteLines(nlohmann::ordered_json::object()), ::testing::IsEmpty());
}

TEST_F(LayoutReportTest, JsonReportKeepsItsKeysAndAddsTheAnswer) {
  const json report = json::parse(RenderJson(view_));
  EXPECT_EQ(report.at("workload"), "layout train.npy");
  EXPECT_EQ(report.at("layout"), testing::ScriptedLayoutAnswer("box-a", 1.0, "tar, 16 shards, streamed", kWhy));
  EXPECT_EQ(report.at("best").at("samples_per_s"), 18530);
  EXPECT_EQ(report.at("baseline").at("samples_per_s"), 15150);
  EXPECT_EQ(report.at("trials").size(), 14u);  // cold 4 + 2 + 1 + 1 (failed) + 3, warm for three
  EXPECT_EQ(report.at("kind"), "layout");
  EXPECT_TRUE(report.at("config_yaml").is_null());  // a layout run has no sweep config
}

TEST_F(LayoutReportTest, HtmlDrawsABarPerCandidateTheNamedOneGreen) {
  const std::string html = RenderHtml(view_);
  EXPECT_THAT(html, HasSubstr("<title>feedtune: layout train.npy on lab-a (run 1)</title>"));
  EXPECT_THAT(html, HasSubstr("<svg class=\"chart layouts\""));
  EXPECT_THAT(html, HasSubstr("<g class=\"layout\" data-name=\"tar, 16 shards, streamed\" data-named=\"true\" "
                              "data-measured=\"true\" data-samples-per-s=\"18530\" data-ci-low=\"17543\" "
                              "data-ci-high=\"18744\" data-warm-samples-per-s=\"27709\" data-workers=\"1\">"));
  EXPECT_THAT(html, HasSubstr("fill=\"#1a7f37\""));  // the named bar
  EXPECT_THAT(html, HasSubstr("<path class=\"warm\""));
  EXPECT_THAT(html, HasSubstr("<path class=\"ci\""));
  EXPECT_THAT(html, HasSubstr("data-name=\"hdf5, chunk 32, gzip:4\" data-named=\"false\" data-measured=\"false\""));
  EXPECT_THAT(html, HasSubstr("<tr class=\"named\"><td>*tar, 16 shards, streamed</td><td class=\"n\">1</td>"));
  EXPECT_THAT(html, HasSubstr("<strong>named: " + kWhy + "</strong>"));
  for (const char* name : {"as-is: npy", "lmdb", "npy"}) EXPECT_THAT(html, HasSubstr(std::string("data-name=\"") + name));
  EXPECT_THAT(html, HasSubstr("<h2>Machine</h2>"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http://www.w3.org/2000/svg\" viewBox=\"0 0 540")));  // not the sweep's chart
}

// A host's row as `compare` collects it, with the answer its run stored.
CompareRow HostRow(const std::string& label, int cpus, const std::string& db, int64_t run_id, const std::string& date,
                   const json& answer) {
  CompareRow row;
  row.host.name = label;
  row.machine = testing::Machine("box-" + label, label, cpus);
  row.machine_hash = "hash-" + label;
  row.db_path = db;
  row.run_id = run_id;
  row.date = date;
  row.layout = answer;
  return row;
}

// Two hosts in compare's order (the faster first).
std::vector<CompareRow> TwoHosts() {
  json a = testing::ScriptedLayoutAnswer("box-a", 1.0, "as-is: npy", "the layout does not matter here");
  a["candidates"].erase(4);  // an older build: no npy candidate
  return {HostRow("lab-b", 16, "/tmp/b.db", 7, "2024-05-02T10:05:00Z",
                  testing::ScriptedLayoutAnswer("box-b", 2.0, "tar, 16 shards, streamed", kWhy)),
          HostRow("lab-a", 2, "/tmp/a.db", 1, "2024-05-01T10:05:00Z", a)};
}

TEST(LayoutSideBySideTest, OneRowPerCandidateOneColumnPerHost) {
  const std::vector<CompareRow> rows = TwoHosts();
  const std::string text = LayoutSideBySideText({&rows[0], &rows[1]});
  EXPECT_EQ(text,
            "cold samples/s of each layout at the num_workers it was best at, per host; * the layout the host "
            "named:\n\n"
            "layout                           lab-b         lab-a\n"
            "----------------------------------------------------\n"
            "as-is: npy                  30300 at 4   *15150 at 4\n"
            "tar, 16 shards, streamed   *37060 at 1    18530 at 1\n"
            "lmdb                         1508 at 0      754 at 0\n"
            "hdf5, chunk 32, gzip:4    not measured  not measured\n"
            "npy                         32000 at 2             -\n"
            "\n"
            "lab-b: " + kWhy + "\n"
            "  lab-b, Test CPU 16c, 16 of 32 CPUs usable (class hash-lab-b); run 7 in b.db, 2024-05-02 10:05\n"
            "lab-a: the layout does not matter here\n"
            "  lab-a, Test CPU 2c, 2 of 4 CPUs usable (class hash-lab-a); run 1 in a.db, 2024-05-01 10:05\n");

  const json j = LayoutSideBySideJson({&rows[0], &rows[1]});
  ASSERT_EQ(j.at("hosts").size(), 2u);
  EXPECT_EQ(j.at("hosts")[1].at("named"), "as-is: npy");
  EXPECT_EQ(j.at("hosts")[0].at("run").at("id"), 7);
  ASSERT_EQ(j.at("candidates").size(), 5u);
  EXPECT_EQ(j.at("candidates")[1].at("name"), "tar, 16 shards, streamed");
  EXPECT_EQ(j.at("candidates")[1].at("cold")[0].at("samples_per_s"), 37060);
  EXPECT_EQ(j.at("candidates")[1].at("cold")[1].at("num_workers"), 1);
  EXPECT_TRUE(j.at("candidates")[3].at("cold")[0].is_null());  // not measured
  EXPECT_TRUE(j.at("candidates")[4].at("cold")[1].is_null());  // lab-a has no npy

  const std::string html = LayoutSideBySideHtml({&rows[0], &rows[1]});
  EXPECT_THAT(html, HasSubstr("<th colspan=\"2\" data-host=\"lab-b\">lab-b</th>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"n named\" data-host=\"lab-a\" data-samples-per-s=\"15150\""));
  EXPECT_THAT(html, HasSubstr("<td class=\"n named\" data-host=\"lab-b\" data-samples-per-s=\"37060\""));
  EXPECT_THAT(html, HasSubstr("<tr><th>named</th><td colspan=\"2\">tar, 16 shards, streamed</td><td colspan=\"2\">"
                              "as-is: npy</td></tr>"));
}

}  // namespace
}  // namespace feedtune::results
