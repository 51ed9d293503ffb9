// Remote data through the feedtune binary, against the project's own store
// (scripts/s3-rig: s3rver behind a proxy that checks SigV4 and injects a
// first-byte latency): `trial` and `sweep` on an s3:// prefix of one object
// per sample, requests in flight per worker, `inspect s3://`, and the errors
// a user meets named (a wrong secret, an empty prefix, a refused connection,
// SlowDown). One rig for the suite; every test skips without s3rver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "storage/credentials.h"
#include "storage/location.h"
#include "storage/object_client.h"
#include "tests/common/cli_scratch.h"
#include "tests/storage/rig.h"

namespace feedtune::storage::testing {
namespace {

namespace fs = std::filesystem;
using feedtune::testing_util::CliResult;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kObjects = 96;
constexpr size_t kObjectBytes = 16 * 1024;

class RemoteCli : public feedtune::testing_util::CliScratchTest {
 protected:
  static void SetUpTestSuite() {
    rig_ = new Rig();
    const CommandResult started = rig_->Start("--latency-ms 20");
    if (started.code == 77) {
      skip_ = "the S3 rig is not installed (scripts/setup-deps --s3): " + started.output;
      return;
    }
    ASSERT_EQ(started.code, 0) << started.output;
    const fs::path data = rig_->dir() / "upload";
    fs::create_directories(data);
    for (int i = 0; i < kObjects; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "s%05d.bin", i);
      std::ofstream(data / name, std::ios::binary) << TestBytes(name, kObjectBytes);
    }
    rig_->Put(data, "s3://feedtune/train/");
    // The feedtune processes the tests start take the rig's credentials and endpoint.
    for (const auto& [key, value] : rig_->env()) setenv(key.c_str(), value.c_str(), 1);
  }
  static void TearDownTestSuite() {
    delete rig_;
    rig_ = nullptr;
  }
  void SetUp() override {
    CliScratchTest::SetUp();
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    rig_->Set("--latency-ms 20 --slowdown-every 0");
  }

  // A config over s3://feedtune/PREFIX: one object per sample, a tiny
  // per-sample cost, the host-sim device without a step.
  std::string Config(const std::string& prefix, int batch_size = 16) {
    return Write("remote.yaml",
                 "name: remote\n"
                 "workload: {kind: files, path: s3://feedtune/" + prefix + ", layout: files, cache: cold,\n"
                 "           cpu_us_per_sample: 50, jitter: 0}\n"
                 "loader: {batch_size: " + std::to_string(batch_size) + "}\n"
                 "device: {backend: host-sim, step_us: 0}\n"
                 "sweep: {max_workers: 2, prefetch_factors: [2], repeats: 2, warmup_batches: 1,\n"
                 "        measure_seconds: 0.4, diagnose: false, background: {sample_seconds: 0.2}}\n");
  }

  std::string P(const std::string& name) const { return (dir_ / name).string(); }
  static storage::ObjectClient Client() {
    return storage::ObjectClient(ParseLocation("s3://feedtune/"), ResolveAwsConfig(rig_->env()));
  }
  static std::string Object(storage::ObjectClient& client, const std::string& key) {
    const std::vector<std::byte> bytes = client.Get(key);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  static std::vector<std::string> Keys(storage::ObjectClient& client, const std::string& prefix) {
    std::vector<std::string> keys;
    for (const auto& o : client.List(prefix)) keys.push_back(o.key.substr(prefix.size()));
    return keys;
  }
  // Every file of the local convert at `local` is an object under `prefix` with its bytes.
  void ExpectSameAsLocal(storage::ObjectClient& client, const fs::path& local, const std::string& prefix) {
    for (const auto& e : fs::directory_iterator(local)) {
      const std::string name = e.path().filename().string();
      if (name == "feedtune-dataset.json") continue;  // it names the source and DST's bytes; the rest is the same
      std::ifstream in(e.path(), std::ios::binary);
      const std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(Object(client, prefix + name), want) << name;
    }
  }

  // Every file of the convert at `want` has the same bytes at `got`, but the
  // manifest, which names the source; returns how many were compared.
  static int ExpectSameFiles(const fs::path& want, const fs::path& got) {
    int files = 0;
    for (const auto& e : fs::directory_iterator(want)) {
      const std::string name = e.path().filename().string();
      if (name == "feedtune-dataset.json") continue;
      std::ifstream a(e.path(), std::ios::binary), b(got / name, std::ios::binary);
      EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}))
          << name;
      ++files;
    }
    return files;
  }

  static Rig* rig_;
  static std::string skip_;
};

Rig* RemoteCli::rig_ = nullptr;
std::string RemoteCli::skip_;

TEST_F(RemoteCli, ATrialReadsEveryObjectAndRequestsInFlightOverlapTheRoundTrips) {
  const std::string config = Config("train/");
  const CliResult one = Run("trial " + config + " --json --set loader.fetch_concurrency=1");
  ASSERT_EQ(one.code, 0) << one.err;
  const CliResult eight = Run("trial " + config + " --json --set loader.fetch_concurrency=8");
  ASSERT_EQ(eight.code, 0) << eight.err;
  EXPECT_NE(one.err.find("nothing of s3://feedtune/train/ is cached on this box"), std::string::npos) << one.err;
  const double at_one = nlohmann::json::parse(one.out)["samples_per_s"];
  const double at_eight = nlohmann::json::parse(eight.out)["samples_per_s"];
  // 20 ms a request: one in flight reads at most 50 samples/s; eight overlap
  // them. Bounds that hold on a loaded box: the rate is bound by the round trip.
  EXPECT_LT(at_one, 60.0);
  EXPECT_GT(at_eight, 2.0 * at_one) << at_one << " vs " << at_eight;
}

// A trial's own figures of the store, as its worker processes read it
// (storage/fetch_tally.h): the first byte behind the injected latency, and
// the SlowDowns the store answered, each retried. The rig refuses every K-th
// request of the whole process (the listing and the warm-up too), so the
// windows' retries are a third of their requests but for the few in flight
// at the windows' edges, not a count the rig can state.
TEST_F(RemoteCli, ATrialReportsTheStoreAsItsWorkersReadIt) {
  const std::string config = Config("train/");
  const std::string knobs = " --set loader.num_workers=2 --set loader.fetch_concurrency=4";
  rig_->Set("--latency-ms 50 --slowdown-every 0");
  CliResult r = Run("trial " + config + " --json" + knobs);
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json store = nlohmann::json::parse(r.out)["store"];
  ASSERT_TRUE(store.is_object()) << r.out;
  const double p50 = store["first_byte_p50_s"];
  EXPECT_GE(p50, 0.045) << "the injector's 50 ms, less the histogram's bucket (4.2%)";
  EXPECT_LT(p50, 0.5);
  EXPECT_GE(store["first_byte_p99_s"].get<double>(), p50);
  const int64_t objects = store["objects"];
  EXPECT_GT(objects, 0) << r.out;
  EXPECT_EQ(store["bytes"].get<int64_t>(), objects * static_cast<int64_t>(kObjectBytes));
  EXPECT_EQ(store["retries"], 0);

  rig_->Set("--latency-ms 0 --slowdown-every 3");
  r = Run("trial " + config + " --json" + knobs);
  ASSERT_EQ(r.code, 0) << r.err;
  store = nlohmann::json::parse(r.out)["store"];
  ASSERT_TRUE(store.is_object()) << r.out;
  const int64_t requests = store["requests"];
  const int64_t slowdowns = store["retries_slowdown"];
  EXPECT_EQ(store["retries"], slowdowns) << "no other cause\n" << store.dump();
  EXPECT_GT(slowdowns, 0) << store.dump();
  // At each of the 4 edges of the 2 windows at most 2 workers x 4 requests are in flight.
  EXPECT_NEAR(3.0 * static_cast<double>(slowdowns), static_cast<double>(requests), 3.0 * 32) << store.dump();
  r = Run("trial " + config + knobs);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("store: first byte p50 "));
  EXPECT_THAT(r.out, HasSubstr(" SlowDown)"));
}

// Tar shards written by gen-data, read from the store by ranges (random),
// in windows (stream) and from the rig's web server; a kind the store is
// not read for is refused at the config, naming what is.
TEST_F(RemoteCli, TarShardsRunFromTheStoreAndFromAWebServer) {
  const fs::path shards = dir_ / "shards";
  const CliResult made = Run("gen-data --out " + shards.string() + " --layout tar --samples 96 --sample-bytes 16384 "
                             "--shards 3");
  ASSERT_EQ(made.code, 0) << made.err;
  rig_->Put(shards, "s3://feedtune/tars/");
  const std::string tar =
      Write("tar.yaml",
            "name: remote-tar\n"
            "workload: {kind: tar, path: s3://feedtune/tars/, cache: cold, cpu_us_per_sample: 50, jitter: 0}\n"
            "loader: {batch_size: 16}\n"
            "device: {backend: host-sim, step_us: 0}\n"
            "sweep: {repeats: 2, warmup_batches: 1, measure_seconds: 0.4, diagnose: false}\n");
  const CliResult one = Run("trial " + tar + " --json --set loader.fetch_concurrency=1");
  ASSERT_EQ(one.code, 0) << one.err;
  const CliResult eight = Run("trial " + tar + " --json --set loader.fetch_concurrency=8");
  ASSERT_EQ(eight.code, 0) << eight.err;
  const double at_one = nlohmann::json::parse(one.out)["samples_per_s"];
  const double at_eight = nlohmann::json::parse(eight.out)["samples_per_s"];
  EXPECT_LT(at_one, 60.0) << "one ranged GET of 20 ms per sample";
  EXPECT_GT(at_eight, 2.0 * at_one) << at_one << " vs " << at_eight;
  const CliResult stream = Run("trial " + tar + " --json --set workload.access=stream");
  ASSERT_EQ(stream.code, 0) << stream.err;
  // A stream reads each shard in 8 MiB windows: one round trip per shard, not per sample.
  EXPECT_GT(nlohmann::json::parse(stream.out)["samples_per_s"].get<double>(), 2.0 * at_one) << stream.out;

  fs::copy_file(shards / "data-00000-of-00003.tar", rig_->http_root() / "one.tar",
                fs::copy_options::overwrite_existing);
  const std::string web = Write("web.yaml", "name: web-tar\n"
                                            "workload: {kind: tar, path: " + rig_->http_url() + "/one.tar}\n"
                                            "loader: {batch_size: 8}\n"
                                            "device: {backend: host-sim, step_us: 0}\n"
                                            "sweep: {repeats: 1, warmup_batches: 1, measure_seconds: 0.3}\n");
  const CliResult from_web = Run("trial " + web + " --json --set loader.fetch_concurrency=4");
  ASSERT_EQ(from_web.code, 0) << from_web.err;
  EXPECT_GT(nlohmann::json::parse(from_web.out)["samples_per_s"].get<double>(), 0.0);

  const std::string records = Write("records.yaml", "name: remote-records\n"
                                                    "workload: {kind: tfrecord, path: s3://feedtune/tars/}\n");
  const CliResult refused = Run("trial " + records);
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_NE(refused.err.find("kind tfrecord is read from local paths only"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("tar shards (kind tar)"), std::string::npos) << refused.err;
}

// At 100 ms to the first byte the round trip binds even on a box whose CPUs
// other tests and hogs fill (at 20 ms there, 2 in flight read no faster than
// 1: the store's and the client's CPUs bound it); batches of 4 keep a
// window's batches many at 10 samples/s.
TEST_F(RemoteCli, TheSweepTunesRequestsInFlightBeforeTheWorkers) {
  rig_->Set("--latency-ms 100 --slowdown-every 0");
  const std::string db = (dir_ / "r.db").string();
  const CliResult sweep = Run("sweep " + Config("train/", 4) + " --db " + db);
  ASSERT_EQ(sweep.code, 0) << sweep.err << sweep.out;
  EXPECT_NE(sweep.err.find("files: s3://feedtune/train/: 96 objects"), std::string::npos) << sweep.err;
  const CliResult report = Run("report --db " + db + " --format json");
  ASSERT_EQ(report.code, 0) << report.err;
  const nlohmann::json j = nlohmann::json::parse(report.out);
  bool kept = false;
  for (const nlohmann::json& phase : j["calibration"]["phases"]) {
    if (phase["phase"] == "fetch_concurrency") kept = phase["kept"];
  }
  EXPECT_TRUE(kept) << report.out;
  EXPECT_GT(j["best"]["config"].value("fetch_concurrency", 1), 1) << j["best"].dump();
  // The store as this box saw it before the baseline, kept with the run.
  EXPECT_NE(sweep.err.find("the store from this box"), std::string::npos) << sweep.err;
  ASSERT_TRUE(j["store_probe"].is_object()) << report.out;
  EXPECT_EQ(j["store_probe"]["source"], "s3://feedtune/train/");
  EXPECT_GE(j["store_probe"]["first_byte_p50_s"].get<double>(), 0.075) << "the injector's 100 ms";
  // Each trial's own reads from the store, behind the same 100 ms.
  for (const nlohmann::json& trial : j["trials"]) {
    if (trial["status"] != "ok") continue;
    ASSERT_TRUE(trial["store"].is_object()) << trial.dump();
    EXPECT_GE(trial["store"]["first_byte_p50_s"].get<double>(), 0.075) << trial.dump();
  }
  const CliResult text = Run("report --db " + db);
  EXPECT_NE(text.out.find("store:    s3://feedtune/train/: first byte p50 "), std::string::npos) << text.out;
  EXPECT_THAT(text.out, HasSubstr("the store per trial"));
  const CliResult compare = Run("compare --db " + db);
  ASSERT_EQ(compare.code, 0) << compare.err;
  EXPECT_NE(compare.out.find("the store from each host"), std::string::npos) << compare.out;
  EXPECT_THAT(compare.out, HasSubstr("; its best trial 0 retries"));
  const CliResult exported = Run("export --db " + db + " --format env");
  EXPECT_NE(exported.out.find("FEEDTUNE_FETCH_CONCURRENCY="), std::string::npos) << exported.out;
}

TEST_F(RemoteCli, InspectShowsTheFirstByteAndTheConcurrencyCurve) {
  const CliResult r = Run("inspect s3://feedtune/train/ --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["first_byte_p50_s"].is_number()) << r.out;
  // The injector's 20 ms, less what the client's clock misses of it on a loaded box.
  EXPECT_GE(j["first_byte_p50_s"].get<double>(), 0.015) << "the injector's 20 ms";
  EXPECT_TRUE(j["first_byte_p99_s"].is_number()) << r.out;
  ASSERT_GE(j["concurrency"].size(), 2u) << r.out;
  EXPECT_EQ(j["concurrency"][0]["in_flight"], 1);
  const CliResult text = Run("inspect s3://feedtune/train/");
  EXPECT_NE(text.out.find("in flight"), std::string::npos) << text.out;
}

TEST_F(RemoteCli, AWronglySignedRequestIsNamedWithItsCredential) {
  const std::string good = getenv("AWS_SECRET_ACCESS_KEY");
  setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
  const CliResult r = Run("trial " + Config("train/"));
  setenv("AWS_SECRET_ACCESS_KEY", good.c_str(), 1);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("SignatureDoesNotMatch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("AWS_ACCESS_KEY_ID in the environment"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not-the-secret"), std::string::npos) << "a secret is never printed\n" << r.err;
}

TEST_F(RemoteCli, AnEmptyPrefixAndARefusedConnectionAreNamed) {
  CliResult r = Run("trial " + Config("nothing-here/"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("s3://feedtune/nothing-here/: no objects under this prefix"), std::string::npos) << r.err;

  const std::string endpoint = getenv("AWS_ENDPOINT_URL");
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
  r = Run("trial " + Config("train/"));
  setenv("AWS_ENDPOINT_URL", endpoint.c_str(), 1);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
}

TEST_F(RemoteCli, SlowDownIsRetriedAndAStoreThatKeepsRefusingIsNamed) {
  rig_->Set("--latency-ms 0 --slowdown-every 3");
  CliResult r = Run("trial " + Config("train/") + " --json --set loader.fetch_concurrency=4");
  EXPECT_EQ(r.code, 0) << "every third request refused, each retried\n" << r.err;
  rig_->Set("--latency-ms 0 --slowdown-every 1");
  r = Run("trial " + Config("train/"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("SlowDown"), std::string::npos) << r.err;
}

// convert to and from an s3:// prefix: the store's objects against a local
// convert of the same source with the same options (tar shards and the index
// are byte-for-byte the same), read back through a client the test makes.
// In RemoteCli's suite: one rig (a second suite would start its own with the
// first one's environment, HOME included).
TEST_F(RemoteCli, ConvertToTheStoreInPartsVerifiedAndTheSameBytesAsALocalConvert) {
  // 240 samples of 50 KB in shards of 6 MB: two of about 5.9 MB (two parts of
  // 5 MiB each way up) and one of 0.3 MB (one PUT).
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 240 --sample-bytes 50000 -q").code, 0);
  const std::string options = " --layout tar --shard-bytes 6000000 --part-bytes 5242880 --shuffle 5";
  const CliResult local = Run("convert " + P("src") + " " + P("local") + options + " -q");
  ASSERT_EQ(local.code, 0) << local.err;
  const CliResult up = Run("convert " + P("src") + " s3://feedtune/conv" + options + " --format json");
  ASSERT_EQ(up.code, 0) << up.err;
  EXPECT_THAT(up.err, HasSubstr("-> s3://feedtune/conv, layout tar: 3 shard objects + index and manifest, about"));
  const auto summary = nlohmann::json::parse(up.out);
  EXPECT_EQ(summary.at("samples"), 240);
  EXPECT_EQ(summary.at("verified"), true);
  EXPECT_EQ(summary.at("upload").at("objects"), 3);
  EXPECT_EQ(summary.at("upload").at("parts_sent"), 4);
  EXPECT_EQ(summary.at("upload").at("parts_resumed"), 0);
  EXPECT_EQ(summary.at("upload").at("bytes_read_back"), summary.at("bytes_on_disk"));
  storage::ObjectClient client = Client();
  EXPECT_EQ(Keys(client, "conv/"),
            (std::vector<std::string>{"data-00000-of-00003.tar", "data-00001-of-00003.tar", "data-00002-of-00003.tar",
                                      "feedtune-dataset.json", "index.ftmap"}));
  ExpectSameAsLocal(client, dir_ / "local", "conv/");
  const auto manifest = nlohmann::json::parse(Object(client, "conv/feedtune-dataset.json"));
  EXPECT_EQ(manifest.at("samples"), 240);
  EXPECT_EQ(manifest.at("layout"), "tar");

  const CliResult again = Run("convert " + P("src") + " s3://feedtune/conv" + options);
  EXPECT_EQ(again.code, 2);
  EXPECT_THAT(again.err, HasSubstr("DST s3://feedtune/conv already holds a converted dataset (240 samples of"));
}

// kill -9 while a shard's parts go up (at 150 ms a request), then --resume:
// no shard under its final key before it is whole, and the parts the killed
// run recorded are not sent again.
TEST_F(RemoteCli, ConvertKillNineMidUploadThenResumeSendsOnlyTheMissingParts) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 400 --sample-bytes 50000 -q").code, 0);
  const std::string options = " --layout tar --shard-bytes 12000000 --part-bytes 5242880";
  ASSERT_EQ(Run("convert " + P("src") + " " + P("local") + options + " -q").code, 0);
  rig_->Set("--latency-ms 150 --slowdown-every 0");
  const std::string args = "convert " + P("src") + " s3://feedtune/killed" + options + " -q";
  storage::ObjectClient client = Client();
  const auto parts_recorded = [&] {
    try {
      return nlohmann::json::parse(Object(client, "killed/.data-00000-of-00002.tar.upload.json")).at("parts").size();
    } catch (const std::exception&) {
      return size_t{0};  // not there yet
    }
  };
  const int status = feedtune::testing_util::SignalFeedtuneWhen(args, [&] { return parts_recorded() >= 1; }, SIGKILL,
                                                                std::chrono::seconds(120));
  ASSERT_TRUE(WIFSIGNALED(status)) << "the convert ended before it was killed";
  const size_t recorded = parts_recorded();
  ASSERT_GE(recorded, 1u);
  ASSERT_LT(recorded, 3u) << "the first shard's three parts were all sent before the kill";
  const std::vector<std::string> left = Keys(client, "killed/");
  EXPECT_EQ(left, (std::vector<std::string>{".data-00000-of-00002.tar.upload.json", "convert-state.json"}))
      << "nothing under a final key until it is whole";

  rig_->Set("--latency-ms 20 --slowdown-every 0");
  const CliResult again = Run(args);
  EXPECT_EQ(again.code, 2);
  EXPECT_THAT(again.err, HasSubstr("holds an interrupted convert (convert-state.json); add --resume to go on"));
  const CliResult resumed = Run(args + " --resume --format json");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto summary = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(summary.at("samples"), 400);
  EXPECT_EQ(summary.at("upload").at("parts_resumed"), recorded);
  EXPECT_EQ(summary.at("upload").at("parts_sent").get<size_t>() + recorded, 5u) << "3 parts and 2";
  EXPECT_EQ(Keys(client, "killed/"),
            (std::vector<std::string>{"data-00000-of-00002.tar", "data-00001-of-00002.tar", "feedtune-dataset.json",
                                      "index.ftmap"}));
  ExpectSameAsLocal(client, dir_ / "local", "killed/");
}

// convert from an s3:// prefix of one object per sample (ImageFolder
// classes from the keys' folders): to a local folder and to another prefix,
// the same shards and index as a convert of the local folder they came from.
TEST_F(RemoteCli, ConvertFromObjectsOnTheStoreTheSameAsFromTheLocalFolder) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 300 --sample-bytes 20000 -q").code, 0);
  rig_->Put(dir_ / "src", "s3://feedtune/objs/");
  const std::string options = " --layout tar --labels folder --shard-bytes 2000000 --shuffle 9 -q";
  ASSERT_EQ(Run("convert " + P("src") + " " + P("local") + options).code, 0);
  const CliResult down = Run("convert s3://feedtune/objs " + P("down") + options + " --format json");
  ASSERT_EQ(down.code, 0) << down.err;
  EXPECT_EQ(nlohmann::json::parse(down.out).at("labels"), true);
  ExpectSameFiles(dir_ / "local", dir_ / "down");
  std::ifstream manifest(dir_ / "down" / "feedtune-dataset.json");
  EXPECT_EQ(nlohmann::json::parse(manifest).at("source").at("path"), "s3://feedtune/objs");

  const CliResult across = Run("convert s3://feedtune/objs s3://feedtune/objs-tar" + options);
  ASSERT_EQ(across.code, 0) << across.err;
  storage::ObjectClient client = Client();
  ExpectSameAsLocal(client, dir_ / "local", "objs-tar/");

  const CliResult web = Run("convert " + rig_->http_url() + "/one.tar " + P("w") + " --layout tar");
  EXPECT_EQ(web.code, 2);
  EXPECT_THAT(web.err, HasSubstr("a web server gives no listing"));
}

// Tar shards on the store as convert's source: the same samples, labels
// (their .cls members) and bytes as from the same shards on a local disk,
// and a shard cut short on the store is refused as a local one is.
TEST_F(RemoteCli, ConvertFromTarShardsOnTheStoreTheSameAsFromTheLocalShards) {
  ASSERT_EQ(Run("gen-data --out " + P("tars") + " --layout tar --samples 120 --sample-bytes 3000 --shards 3 -q").code,
            0);
  rig_->Put(dir_ / "tars", "s3://feedtune/srctars/");
  const std::string options = " --layout tar --shard-bytes 100000 --shuffle 5 -q --format json";
  const CliResult local = Run("convert " + P("tars") + " " + P("local") + options);
  ASSERT_EQ(local.code, 0) << local.err;
  const CliResult down = Run("convert s3://feedtune/srctars/ " + P("down") + options + " --labels cls");
  ASSERT_EQ(down.code, 0) << down.err;
  const nlohmann::json j = nlohmann::json::parse(down.out);
  EXPECT_EQ(j.at("labels"), true);
  EXPECT_EQ(j.at("samples"), 120);
  EXPECT_GE(ExpectSameFiles(dir_ / "local", dir_ / "down"), 5);  // the shards and their index

  // A shard without its end-of-archive blocks: its last samples may be lost.
  const fs::path cut = dir_ / "cut";
  fs::create_directories(cut);
  const fs::path shard = dir_ / "tars" / "data-00000-of-00003.tar";
  std::ifstream in(shard, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.resize(bytes.size() - 1024);
  std::ofstream(cut / "data-00000-of-00001.tar", std::ios::binary) << bytes;
  rig_->Put(cut, "s3://feedtune/cuttars/");
  const CliResult refused = Run("convert s3://feedtune/cuttars/ " + P("c") + " --layout tar");
  EXPECT_EQ(refused.code, 2) << refused.err;  // damaged input, as a local shard cut short
  EXPECT_THAT(refused.err, HasSubstr("s3://feedtune/cuttars/data-00000-of-00001.tar: truncated: no end-of-archive"));
  const CliResult folder = Run("convert s3://feedtune/srctars/ " + P("f") + " --layout tar --labels folder");
  EXPECT_EQ(folder.code, 2);
  EXPECT_THAT(folder.err, HasSubstr("--labels folder: s3://feedtune/srctars/ is tar shards, whose labels are their .cls members"));
}

TEST_F(RemoteCli, ConvertWhatAStoreCannotTakeIsRefusedNamingIt) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 20 --sample-bytes 1000 -q").code, 0);
  const CliResult hdf5 = Run("convert " + P("src") + " s3://feedtune/h5 --layout hdf5");
  EXPECT_EQ(hdf5.code, 2);
  EXPECT_THAT(hdf5.err, HasSubstr("DST s3://feedtune/h5: a store takes --layout tar"));
  const CliResult occupied = Run("convert " + P("src") + " s3://feedtune/train --layout tar");
  EXPECT_EQ(occupied.code, 2);
  EXPECT_THAT(occupied.err, HasSubstr("DST s3://feedtune/train holds other objects (s00000.bin...)"));
  const CliResult nothing = Run("convert " + P("src") + " s3://feedtune/none --layout tar --resume");
  EXPECT_EQ(nothing.code, 2);
  EXPECT_THAT(nothing.err, HasSubstr("--resume: s3://feedtune/none holds no interrupted convert"));
  const CliResult part = Run("convert " + P("src") + " s3://feedtune/p --layout tar --part-bytes 1000000");
  EXPECT_EQ(part.code, 2);
  EXPECT_THAT(part.err, HasSubstr("--part-bytes: S3 takes parts of at least 5 MiB"));
  const CliResult web = Run("convert " + P("src") + " " + rig_->http_url() + "/out --layout tar");
  EXPECT_EQ(web.code, 2);
  EXPECT_THAT(web.err, HasSubstr("an http(s) server is read-only"));

  setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
  const CliResult forbidden = Run("convert " + P("src") + " s3://feedtune/forbidden --layout tar");
  setenv("AWS_SECRET_ACCESS_KEY", rig_->env().at("AWS_SECRET_ACCESS_KEY").c_str(), 1);
  EXPECT_EQ(forbidden.code, 1);
  EXPECT_THAT(forbidden.err, HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(forbidden.err, HasSubstr("the secret access key (from AWS_SECRET_ACCESS_KEY in the environment)"));
}

// Pads the JPEG at `path` to exactly `bytes` with a comment segment (COM,
// 0xFFFE) after its start marker, which decoders skip: JPEGs of known sizes,
// so that the shards convert fills, and the GETs they cost, are exact.
void PadJpeg(const fs::path& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string jpeg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  ASSERT_GE(bytes, jpeg.size() + 4) << path << " is larger than the size it is padded to";
  const size_t segment = bytes - jpeg.size() - 2;  // its length field counts itself, not the marker
  ASSERT_LE(segment, 65535u) << path;
  std::string com = "\xFF\xFE";
  com += static_cast<char>(segment >> 8);
  com += static_cast<char>(segment & 0xFF);
  com += std::string(segment - 2, ' ');
  jpeg.insert(2, com);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << jpeg;
}

// `feedtune layout` on the store: a prefix of 96 JPEGs of 128x96 (two sizes
// of file, 16 KB on average) whose local copy was measured first, both as a
// job that decodes them reads them (decode: jpeg in every trial), so raw
// pixels are a candidate on both. The rig at 5 ms keeps the streamed
// candidates of one object a sample (a GET each) within seconds.
TEST_F(RemoteCli, LayoutOnTheStoreNamesALayoutWithRequestsPerEpochAndClearsItsScratch) {
  rig_->Set("--latency-ms 5");
  const fs::path local = dir_ / "mixed";
  ASSERT_EQ(Run("gen-data --out " + local.string() + " --layout jpeg --samples 96 --image-size 128x96 -q").code, 0);
  for (int i = 0; i < 96; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "00000/%09d.jpg", i);
    PadJpeg(local / name, i % 2 == 0 ? 12288 : 20480);
  }
  rig_->Put(local, "s3://feedtune/mixed/");
  const std::string db = P("layout.db");
  const std::string options =
      " --sample-mb 1 --repeats 2 --measure-seconds 0.2 --max-workers 1 --batch-size 4 --db " + db;
  // The local copy's answer first (run 1), which the store's names.
  const CliResult here = Run("layout " + local.string() + options + " -q --format json");
  ASSERT_EQ(here.code, 0) << here.err;
  const std::string local_named = nlohmann::json::parse(here.out).at("named");

  const CliResult table = Run("layout s3://feedtune/mixed/" + options);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("fc  cold samples/s (95% CI) requests/epoch   on store"));
  EXPECT_THAT(table.out, HasSubstr("cold on a store: nothing of the candidates is cached on this box"));
  EXPECT_THAT(table.out, HasSubstr("not a candidate: lmdb, hdf5 and npy: read from local paths only"));
  EXPECT_THAT(table.out, Not(HasSubstr("not a candidate: tar, raw pixels")));
  EXPECT_THAT(table.out, HasSubstr("each JPEG decoded, cropped and resized to 224x224"));
  EXPECT_THAT(table.err, HasSubstr("layout: deleted the "));
  EXPECT_THAT(table.err, HasSubstr("stored as run 2"));
  storage::ObjectClient client = Client();
  EXPECT_TRUE(Keys(client, "mixed.layout-scratch/").empty());  // the scratch prefix is empty again
  EXPECT_EQ(Keys(client, "mixed/").size(), 96u);                // and the source as it was

  // The answer as stored (report's JSON holds it, as --format json prints it).
  const CliResult report = Run("report --run 2 --format json --db " + db);
  ASSERT_EQ(report.code, 0) << report.err;
  const nlohmann::json j = nlohmann::json::parse(report.out).at("layout");
  ASSERT_TRUE(j.at("named").is_string()) << j.dump();
  EXPECT_EQ(j.at("sample").at("samples"), 64);
  EXPECT_EQ(j.at("decode"), "jpeg");
  // The GETs of an epoch of all 96: one per object, or per sample read from
  // tar shards by ranges; streamed, one per shard (each under the 8 MiB
  // window). A sixteenth of the data (98304 bytes) holds 5 samples of 16 KB
  // and their headers, so 20 shards; a 64th and a 256th hold one sample, 96.
  // Raw pixels in shards of the same 98304 bytes: 2 images of 128x96x3
  // (36864 bytes, PPM header and tar headers counted as convert counts
  // them, 36880 + 1024) a shard, so 48 shards.
  const std::vector<std::pair<std::string, int>> expected = {{"as-is: an object per sample", 96},
                                                             {"tar, 16 shards, map-style", 96},
                                                             {"tar, 16 shards, streamed", 20},
                                                             {"tar, 64 shards, streamed", 96},
                                                             {"tar, 256 shards, streamed", 96},
                                                             {"tar, raw pixels, 16 shards, streamed", 48}};
  ASSERT_EQ(j.at("candidates").size(), expected.size()) << j.dump();
  for (size_t i = 0; i < expected.size(); ++i) {
    const nlohmann::json& c = j.at("candidates")[i];
    EXPECT_EQ(c.at("name"), expected[i].first);
    EXPECT_EQ(c.at("requests_per_epoch"), expected[i].second) << expected[i].first;
    ASSERT_TRUE(c.at("measured").get<bool>()) << c.dump();
    if (expected[i].first.find("streamed") != std::string::npos) {
      EXPECT_TRUE(c.at("fetch_concurrency").is_null()) << c.dump();  // a stream's requests in flight are its workers
    } else {
      // Requests in flight per worker, doubled from 1 up to the batch size while they gained.
      const int in_flight = c.at("fetch_concurrency").get<int>();
      EXPECT_TRUE(in_flight == 1 || in_flight == 2 || in_flight == 4) << c.dump();
      EXPECT_EQ(c.at("cold").at("fetch_concurrency"), in_flight);
    }
    EXPECT_TRUE(c.at("warm").is_null());  // nothing of a store is cached on this box, warm or cold
  }
  EXPECT_EQ(j.at("candidates")[1].at("convert_arguments"), "--layout tar --shard-bytes 98304");
  EXPECT_EQ(j.at("candidates")[5].at("convert_arguments"), "--layout tar --shard-bytes 98304 --pixels");
  const nlohmann::json& store = j.at("store");
  EXPECT_EQ(store.at("scratch"), "s3://feedtune/mixed.layout-scratch/");
  ASSERT_EQ(store.at("left_out").size(), 1u);
  // The local copy's answer, found by its data: the same layout named (the
  // source as it is on both counts as the same), or another.
  EXPECT_EQ(store.at("local").at("run"), 1);
  EXPECT_EQ(store.at("local").at("named"), local_named);
  const std::string named = j.at("named");
  const bool same = local_named == named || (local_named.starts_with("as-is") && named.starts_with("as-is"));
  const std::string line = same ? "on a local disk this box named the same, " + local_named + " (run 1 in " + db
                                : "on a local disk this box named " + local_named + " (run 1 in " + db;
  EXPECT_THAT(store.at("local_line").get<std::string>(), HasSubstr(line)) << named;
  EXPECT_THAT(table.out, HasSubstr(line));
  if (!same) {
    EXPECT_THAT(table.out, HasSubstr("on the store the winner differs"));
  }
}

// Tar shards on the store as layout's source: the source as it is is its
// shards written again from the sample at the source's shard count, read
// map-style (a GET per sample), beside the other candidates.
TEST_F(RemoteCli, LayoutOnTarShardsOnTheStoreMeasuresThemAsTheyAre) {
  rig_->Set("--latency-ms 5");
  ASSERT_EQ(Run("gen-data --out " + P("ltars") + " --layout tar --samples 64 --sample-bytes 4096 --shards 4 -q").code,
            0);
  rig_->Put(dir_ / "ltars", "s3://feedtune/ltars/");
  const CliResult answer = Run("layout s3://feedtune/ltars/ --sample-mb 1 --repeats 2 --measure-seconds 0.2 "
                               "--max-workers 1 --batch-size 4 -q --format json --db " + P("l.db"));
  ASSERT_EQ(answer.code, 0) << answer.err;
  const nlohmann::json j = nlohmann::json::parse(answer.out);
  EXPECT_EQ(j.at("sample").at("samples"), 64);
  const nlohmann::json& as_is = j.at("candidates")[0];
  EXPECT_EQ(as_is.at("name"), "as-is: tar");
  EXPECT_TRUE(as_is.at("as_is").get<bool>());
  EXPECT_TRUE(as_is.at("measured").get<bool>()) << as_is.dump();
  EXPECT_EQ(as_is.at("requests_per_epoch"), 64);  // map-style: a ranged GET per sample
  EXPECT_EQ(j.at("candidates")[1].at("name"), "tar, 16 shards, map-style");
  storage::ObjectClient client = Client();
  EXPECT_TRUE(Keys(client, "ltars.layout-scratch/").empty());
  EXPECT_EQ(Keys(client, "ltars/").size(), 4u);
}

TEST_F(RemoteCli, LayoutOnTheStoreRefusesWhatItCannotMeasureNamingTheFix) {
  ASSERT_EQ(Run("gen-data --out " + P("tars") + " --layout tar --samples 20 --sample-bytes 1000 --shards 2 -q").code, 0);
  rig_->Put(dir_ / "tars", "s3://feedtune/busy/");
  struct Refusal {
    std::string args, says;
  };
  const std::vector<Refusal> refusals = {
      {"s3://feedtune/train/ --scratch s3://feedtune/busy",
       "--scratch s3://feedtune/busy/ holds objects (s3://feedtune/busy/"},
      {"s3://feedtune/train/ --scratch s3://feedtune/busy", "aws s3 rm --recursive s3://feedtune/busy/"},
      {rig_->http_url() + "/one.tar", "a web server gives no listing; layout reads an s3:// prefix"},
      {"s3://feedtune/train/ --scratch " + P("here"), "a dataset on a store is measured on the store"},
      {"s3://feedtune/train", "is under the source's prefix 'train'"},
      {"s3://feedtune/train/ --scratch s3://feedtune/train/x/", "is under the source's prefix 'train/'"},
      {"s3://feedtune/train/ --scratch s3://feedtune/", "a whole bucket"},
      {"s3://feedtune/train/ --decode jpeg", "are 'bin', not JPEGs"},
  };
  for (const Refusal& refusal : refusals) {
    const CliResult refused = Run("layout " + refusal.args);
    EXPECT_EQ(refused.code, 2) << refusal.args << ": " << refused.err;
    EXPECT_THAT(refused.err, HasSubstr(refusal.says)) << refusal.args;
  }
  // A local dataset on a store: its own layout must be one a store is read in.
  ASSERT_EQ(Run("gen-data --out " + P("d.npy") + " --layout npy --samples 64 --sample-bytes 100 -q").code, 0);
  const CliResult npy = Run("layout " + P("d.npy") + " --scratch s3://feedtune/npy-scratch/");
  EXPECT_EQ(npy.code, 2);
  EXPECT_THAT(npy.err, HasSubstr("(npy) is read from local paths only"));
  storage::ObjectClient client = Client();
  EXPECT_EQ(Keys(client, "busy/").size(), 2u);  // a refused scratch is left as it was
}

}  // namespace
}  // namespace feedtune::storage::testing
