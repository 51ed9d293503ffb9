// `feedtune layout PATH` end to end on a small HDF5-sized npy source: every
// candidate that fits is written and measured, the named one follows the rule
// of layout/advice.h from the figures it printed, the scratch folder goes, and
// bad input is refused with the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/common/cli_scratch.h"

namespace feedtune::layout {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

class LayoutCli : public testing_util::CliScratchTest {
 protected:
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
};

TEST_F(LayoutCli, MeasuresEveryCandidateAndNamesByTheRule) {
  // 150 samples of 40000 bytes: a chunk of 32 is 1.28 MB, over HDF5's 1 MiB cache.
  ASSERT_EQ(Run("gen-data --out " + P("data.npy") + " --layout npy --samples 150 --sample-bytes 40000 -q").code, 0);
  const auto r = Run("layout " + P("data.npy") + " --scratch " + P("scratch") +
                     " --measure-seconds 0.1 --repeats 2 --max-workers 1 --format json --db " + P("r.db"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("layout: [1/9] as-is: npy, cold, 0 workers: "));
  EXPECT_FALSE(fs::exists(dir_ / "scratch"));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("dataset").at("samples"), 150);
  EXPECT_EQ(j.at("sample").at("samples"), 150);
  std::vector<std::string> names;
  for (const auto& c : j.at("candidates")) names.push_back(c.at("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"as-is: npy", "tar, 16 shards, map-style", "tar, 16 shards, streamed",
                                              "tar, 64 shards, streamed", "lmdb", "hdf5, chunk 1", "hdf5, chunk 1, gzip:4", "hdf5, chunk 32",
                                              "hdf5, chunk 32, gzip:4"}));
  double fastest = 0, fastest_low = 0;
  for (const auto& c : j.at("candidates")) {
    ASSERT_TRUE(c.at("measured").get<bool>()) << c.dump();
    const auto& cold = c.at("cold");
    const double median = cold.at("samples_per_s");
    EXPECT_GT(median, 0) << c.at("name");
    EXPECT_LE(cold.at("ci")[0].get<double>(), median);
    EXPECT_GE(cold.at("ci")[1].get<double>(), median);
    EXPECT_LE(cold.at("num_workers").get<int>(), 1);
    EXPECT_GT(c.at("warm").at("samples_per_s").get<double>(), 0);
    EXPECT_GT(c.at("sample_bytes_on_disk").get<int64_t>(), 150 * 40000 * 9 / 10) << c.at("name");
    if (median > fastest) {
      fastest = median;
      fastest_low = cold.at("ci")[0];
    }
  }
  // Each cache note names its candidate and carries the eviction's residency as a number, or null where a
  // window read its sample warm (the figure an upper bound), never only as words.
  for (const auto& n : j.at("cache_notes")) {
    ASSERT_TRUE(n.is_object()) << n.dump();
    EXPECT_THAT(names, testing::Contains(n.at("candidate").get<std::string>()));
    const auto& resident = n.at("resident_fraction");
    if (resident.is_null()) {
      EXPECT_THAT(n.at("note").get<std::string>(), HasSubstr("a cold window read the sample")) << n.dump();
    } else {
      EXPECT_GE(resident.get<double>(), 0.0);
      EXPECT_LE(resident.get<double>(), 1.0);
      EXPECT_THAT(n.at("note").get<std::string>(), HasSubstr("stayed resident")) << n.dump();
    }
  }
  // The gzip chunk of 32 over the cache: a shuffled read inflates the whole chunk.
  EXPECT_DOUBLE_EQ(j.at("candidates")[8].at("read_amplification").get<double>(), 32.0);
  EXPECT_DOUBLE_EQ(j.at("candidates")[5].at("read_amplification").get<double>(), 1.0);
  // What writes each: the shard size of the sample's shards, for the whole dataset.
  EXPECT_TRUE(j.at("candidates")[0].at("convert_arguments").is_null());
  EXPECT_EQ(j.at("candidates")[3].at("convert_arguments"),
            "--layout tar --shard-bytes " + std::to_string(150 * 40000 / 64));
  EXPECT_EQ(j.at("candidates")[8].at("convert_arguments"), "--layout hdf5 --chunk-samples 32 --compression gzip:4");
  EXPECT_EQ(j.at("decode"), "none");
  // The rule: the fastest, or within its noise the fewest bytes where they save 5% of the
  // fastest's (or, when all are within it, the source).
  int64_t fastest_bytes = 0;
  std::string fastest_name;
  for (const auto& c : j.at("candidates")) {
    if (c.at("cold").at("samples_per_s").get<double>() == fastest) {
      fastest_bytes = c.at("bytes_on_disk");
      fastest_name = c.at("name");
    }
  }
  int64_t fewest = fastest_bytes;
  std::string want = fastest_name;
  int within = 0;
  for (const auto& c : j.at("candidates")) {
    if (c.at("cold").at("ci")[1].get<double>() < fastest_low) continue;
    ++within;
    const int64_t bytes = c.at("bytes_on_disk");
    if (bytes < 0.95 * static_cast<double>(fastest_bytes) && bytes < fewest) {
      fewest = bytes;
      want = c.at("name");
    }
  }
  if (within == 9) {
    EXPECT_EQ(j.at("named"), "as-is: npy");
    EXPECT_FALSE(j.at("layout_matters").get<bool>());
  } else {
    EXPECT_EQ(j.at("named"), want);
    EXPECT_THAT(j.at("why").get<std::string>(), HasSubstr(want + ": "));
  }
  // Stored as a run: a trial per measurement, the named layout's best cold one as its best.
  const auto report = Run("report --db " + P("r.db") + " --format json");
  ASSERT_EQ(report.code, 0) << report.err;
  const auto run = nlohmann::json::parse(report.out);
  EXPECT_EQ(run.at("workload"), "layout data.npy");
  EXPECT_EQ(run.at("status"), "done");
  int cold = 0, warm = 0;
  for (const auto& t : run.at("trials")) {
    const std::string phase = t.at("phase");
    cold += phase.starts_with("layout-cold: ");
    warm += phase.starts_with("layout-warm: ");
  }
  EXPECT_GE(cold, 9);
  EXPECT_EQ(warm, 9);
  for (const auto& c : j.at("candidates")) {
    if (c.at("name") == j.at("named")) {
      EXPECT_DOUBLE_EQ(run.at("best").at("samples_per_s").get<double>(), c.at("cold").at("samples_per_s").get<double>());
    }
    if (c.at("as_is").get<bool>()) {
      EXPECT_DOUBLE_EQ(run.at("baseline").at("samples_per_s").get<double>(),
                       c.at("cold").at("samples_per_s").get<double>());
    }
  }
  // A layout run by its kind, with its answer as the report's "layout" key, and no sweep config.
  EXPECT_EQ(run.at("kind"), "layout");
  EXPECT_EQ(run.at("layout").at("named"), j.at("named"));
  EXPECT_TRUE(run.at("config_yaml").is_null());
}

// The source as it is keeps its chunk trap: the as-is copy of a gzip file
// with 50-row chunks is gzip with 50-row chunks, and inflates a whole chunk
// per shuffled sample.
TEST_F(LayoutCli, TheSourceAsItIsKeepsItsChunksAndGzip) {
  ASSERT_EQ(Run("gen-data --out " + P("trap.h5") + " --layout hdf5 --samples 100 --sample-bytes 30000 "
                "--chunk-samples 50 --compression gzip:4 -q").code, 0);
  const auto r = Run("layout " + P("trap.h5") + " --measure-seconds 0.1 --repeats 2 --max-workers 1 --format json -q "
                     "--db " + P("r.db"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& as_is = j.at("candidates")[0];
  EXPECT_EQ(as_is.at("name"), "as-is: hdf5, chunk 50, gzip:4");
  EXPECT_DOUBLE_EQ(as_is.at("read_amplification").get<double>(), 50.0);  // 1.5 MB chunks over a 1 MiB cache
}

TEST_F(LayoutCli, TheTableNamesOneRowAndSaysWhy) {
  ASSERT_EQ(Run("gen-data --out " + P("jpeg") + " --layout jpeg --samples 40 --image-size 64x48 -q").code, 0);
  const auto r = Run("layout " + P("jpeg") + " --measure-seconds 0.1 --repeats 2 --max-workers 1 -q --db " + P("r.db"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cold samples/s (95% CI)"));
  EXPECT_THAT(r.out, HasSubstr("as-is: a file per sample"));
  EXPECT_THAT(r.out, HasSubstr("\nnamed: "));
  EXPECT_THAT(r.out, HasSubstr("40 of 40 samples measured on "));
  int starred = 0;
  for (size_t at = r.out.find("\n*"); at != std::string::npos; at = r.out.find("\n*", at + 1)) ++starred;
  EXPECT_EQ(starred, 1);
  EXPECT_FALSE(fs::exists(dir_ / "jpeg.layout-scratch"));  // beside PATH by default, and removed
  // Stored: `report` shows the run as the same answer, from the results file.
  const auto report = Run("report --db " + P("r.db"));
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("cold samples/s (95% CI)"));
  const size_t named = r.out.find("\nnamed: ");
  ASSERT_NE(named, std::string::npos);
  EXPECT_THAT(report.out, HasSubstr(r.out.substr(named, r.out.find('\n', named + 1) - named + 1)));  // the why line
  EXPECT_THAT(report.out, HasSubstr("cold samples/s by num_workers"));
  int stored_starred = 0;
  for (size_t at = report.out.find("\n*"); at != std::string::npos; at = report.out.find("\n*", at + 1)) ++stored_starred;
  EXPECT_EQ(stored_starred, 1);
}

// JPEG samples are decoded in every trial, as the job decodes them, and raw
// pixels (decoded once by convert --pixels) are a candidate: bytes on disk
// against decode CPU. HDF5 and npy, whose readers do not decode, are not.
TEST_F(LayoutCli, JpegSamplesAreDecodedAndRawPixelsAreACandidate) {
  ASSERT_EQ(Run("gen-data --out " + P("jpeg") + " --layout jpeg --samples 40 --image-size 64x48 -q").code, 0);
  auto r = Run("layout " + P("jpeg") + " --measure-seconds 0.1 --repeats 2 --max-workers 1 --format json -q --db " +
               P("r.db") + " --scratch " + P("scratch") + " --keep");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("decode"), "jpeg");
  std::vector<std::string> names;
  for (const auto& c : j.at("candidates")) {
    names.push_back(c.at("name"));
    EXPECT_TRUE(c.at("measured").get<bool>()) << c.dump();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"as-is: a file per sample", "tar, 16 shards, map-style",
                                              "tar, 16 shards, streamed", "tar, 64 shards, streamed",
                                              "tar, raw pixels, 16 shards, streamed", "lmdb"}));
  const auto& pixels = j.at("candidates")[4];
  EXPECT_EQ(pixels.at("convert_arguments").get<std::string>().substr(0, 13), "--layout tar ");
  EXPECT_THAT(pixels.at("convert_arguments").get<std::string>(), testing::EndsWith(" --pixels"));
  // 64 x 48 x 3 bytes of pixels and a PPM header per image, more than the JPEGs.
  EXPECT_GT(pixels.at("sample_bytes_on_disk").get<int64_t>(), 40 * 64 * 48 * 3);
  EXPECT_LT(j.at("candidates")[0].at("sample_bytes_on_disk").get<int64_t>(), 40 * 64 * 48 * 3);
  // Every candidate's config decodes.
  for (const auto& entry : fs::directory_iterator(dir_ / "scratch")) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_THAT(text, HasSubstr("decode: jpeg")) << entry.path();
  }
  // A job that decodes elsewhere (on the GPU): the stored bytes only, and no raw pixels.
  r = Run("layout " + P("jpeg") + " --decode none --measure-seconds 0.1 --repeats 2 --max-workers 1 --format json -q "
          "--db " + P("r.db"));
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("decode"), "none");
  EXPECT_EQ(j.at("candidates").size(), 5u);
  ASSERT_EQ(Run("gen-data --out " + P("n.npy") + " --layout npy --samples 10 --sample-bytes 100 -q").code, 0);
  r = Run("layout " + P("n.npy") + " --decode jpeg");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--decode jpeg: the samples of " + P("n.npy") + " are 'bin', not JPEGs"));
}

TEST_F(LayoutCli, BadInputIsRefusedWithTheFix) {
  auto r = Run("layout " + P("nothing"));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(P("nothing") + ": cannot open: No such file or directory"));
  ASSERT_EQ(Run("gen-data --out " + P("data.npy") + " --layout npy --samples 10 --sample-bytes 100 -q").code, 0);
  fs::create_directories(dir_ / "busy");
  Write("busy/mine.txt", "x");
  r = Run("layout " + P("data.npy") + " --scratch " + P("busy"));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--scratch " + P("busy") + " exists and is not empty; choose another, or remove it"));
  r = Run("layout " + P("data.npy") + " --format yaml");
  EXPECT_THAT(r.err, HasSubstr("--format: expected table or json, got 'yaml'"));
}

}  // namespace
}  // namespace feedtune::layout
