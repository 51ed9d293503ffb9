// `feedtune convert` (layout/convert.h, docs/layout.md): the binary run as a
// user runs it, and the library where a case needs the file system changed
// under an open source. Each test checks exact samples and labels against the
// source, or the exact words of an error.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <thread>

#include <nlohmann/json.hpp>

#include "layout/convert.h"
#include "layout/converted.h"
#include "layout/source.h"
#include "tests/common/cli_scratch.h"
#include "workloads/format_io.h"
#include "workloads/hdf5_dataset.h"
#include "workloads/jpeg_samples.h"
#include "workloads/synthetic_dataset.h"
#include "workloads/tar_dataset.h"
#include "workloads/tar_format.h"

namespace feedtune::layout {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;
using testing_util::ReadFile;

// Every file under `root` with its bytes: the source before and after.
std::map<std::string, std::string> Snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  if (fs::is_regular_file(root)) {
    files[root.string()] = ReadFile(root);
    return files;
  }
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files[entry.path().string()] = ReadFile(entry.path());
  }
  return files;
}

// The samples of a converted tar DST as the index says where they are (each
// its payload member). The manifest is parsed once and each shard read once:
// a sample at a time it was 1,500 parses and whole-shard reads for one check,
// two minutes of a test under ASan at -O0.
class DstTar {
 public:
  explicit DstTar(const fs::path& dst) : dst_(dst), manifest_(nlohmann::json::parse(ReadFile(dst / kManifestName))) {}

  std::string Sample(const IndexRecord& r) {
    auto [it, added] = shards_.try_emplace(r.file);
    if (added) it->second = ReadFile(dst_ / manifest_.at("files").at(static_cast<size_t>(r.file)).get<std::string>());
    return it->second.substr(static_cast<size_t>(r.offset), static_cast<size_t>(r.bytes));
  }

 private:
  fs::path dst_;
  nlohmann::json manifest_;
  std::map<int64_t, std::string> shards_;
};

// A shard under a final name is a whole tar: every header checks, and it
// ends with the two zero blocks.
void ExpectWholeTar(const fs::path& path) {
  const workloads::UniqueFd fd(::open(path.c_str(), O_RDONLY));
  ASSERT_TRUE(fd.valid()) << path;
  const auto size = static_cast<int64_t>(fs::file_size(path));
  EXPECT_NO_THROW(workloads::ScanTarFile(path.string(), fd.get(), size)) << path;
  const std::string bytes = ReadFile(path);
  ASSERT_GE(bytes.size(), 1024u);
  EXPECT_EQ(bytes.substr(bytes.size() - 1024), std::string(1024, '\0')) << path << " lacks its end blocks";
}

class ConvertCli : public testing_util::CliScratchTest {
 protected:
  std::string P(const std::string& name) const { return (dir_ / name).string(); }

  // Every sample of DST (by the index, in DST order) equals the source's file
  // of the same number, byte for byte.
  void ExpectFolderSamples(const std::string& src, const std::string& dst, int64_t count) {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(src)) {
      if (e.is_regular_file()) files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    const auto records = ReadIndex((fs::path(dst) / kIndexName).string());
    ASSERT_EQ(static_cast<int64_t>(records.size()), count);
    DstTar converted(dst);
    for (size_t j = 0; j < records.size(); ++j) {
      ASSERT_EQ(records[j].source, static_cast<int64_t>(j));
      ASSERT_EQ(converted.Sample(records[j]), ReadFile(files[j])) << "sample " << j;
    }
  }
};

TEST_F(ConvertCli, JpegFolderToTarHoldsEverySampleInOrderAndLeavesTheSourceAsItWas) {
  ASSERT_EQ(Run("gen-data --out " + P("jpeg") + " --layout jpeg --samples 60 --image-size 64x48 -q").code, 0);
  const auto before = Snapshot(P("jpeg"));
  const auto r = Run("convert " + P("jpeg") + " " + P("dst") + " --layout tar --shard-bytes 40000 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary.at("samples"), 60);
  EXPECT_EQ(summary.at("verified"), true);
  EXPECT_GT(summary.at("files").get<int>(), 2);
  // Progress with a rate and the time left, on stderr.
  EXPECT_THAT(r.err, HasSubstr("convert: write 60/60 samples (100%)"));
  EXPECT_THAT(r.err, HasSubstr("samples/s"));
  EXPECT_THAT(r.err, HasSubstr("s left"));
  EXPECT_THAT(r.err, HasSubstr("convert: verify 60/60"));
  ExpectFolderSamples(P("jpeg"), P("dst"), 60);
  const auto manifest = nlohmann::json::parse(ReadFile(dir_ / "dst" / kManifestName));
  EXPECT_EQ(manifest.at("payload"), "jpg");
  EXPECT_EQ(manifest.at("labels"), false);
  EXPECT_FALSE(fs::exists(dir_ / "dst" / kStateName));
  for (const auto& f : manifest.at("files")) ExpectWholeTar(dir_ / "dst" / f.get<std::string>());
  EXPECT_EQ(Snapshot(P("jpeg")), before);
}

// --pixels: each JPEG stored decoded, as a PPM of its full size, verified
// against the source decoded; a reader's decode: jpeg crops and resizes the
// pixels without a decode, to the bytes it makes of the JPEG itself.
TEST_F(ConvertCli, PixelsStoreEachJpegDecodedAndReadersCropThemAsJpegs) {
  ASSERT_EQ(Run("gen-data --out " + P("jpeg") + " --layout jpeg --samples 12 --image-size 64x48 -q").code, 0);
  auto r = Run("convert " + P("jpeg") + " " + P("dst") + " --layout tar --pixels --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("samples"), 12);
  EXPECT_EQ(nlohmann::json::parse(r.out).at("pixels"), true);
  const auto manifest = nlohmann::json::parse(ReadFile(dir_ / "dst" / kManifestName));
  EXPECT_EQ(manifest.at("payload"), "ppm");
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(P("jpeg"))) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  const auto records = ReadIndex(P("dst/" + std::string(kIndexName)));
  ASSERT_EQ(records.size(), 12u);
  workloads::FilesOptions center;
  center.decode = workloads::FilesDecode::kJpeg;
  center.crop = workloads::CropMode::kCenter;
  center.resize = 32;
  const workloads::JpegSamples decoder(center, 0);
  for (size_t j = 0; j < records.size(); ++j) {
    const std::string stored = DstTar(P("dst")).Sample(records[j]);
    ASSERT_EQ(stored.substr(0, 13), "P6\n64 48\n255\n") << j;
    ASSERT_EQ(stored.size(), 13u + 64 * 48 * 3) << j;
    const std::string jpeg = ReadFile(files[j]);
    std::string from_pixels(32 * 32 * 3, '\0'), from_jpeg(32 * 32 * 3, '\0');
    decoder.Decode(std::as_bytes(std::span(stored)), static_cast<int64_t>(j), std::as_writable_bytes(std::span(from_pixels)));
    decoder.Decode(std::as_bytes(std::span(jpeg)), static_cast<int64_t>(j), std::as_writable_bytes(std::span(from_jpeg)));
    EXPECT_EQ(from_pixels, from_jpeg) << "sample " << j;  // a 42 px crop to 32: no DCT scaling, the same pixels
  }
  // The layouts of rows of one size, and samples that are not JPEGs, are refused.
  r = Run("convert " + P("jpeg") + " " + P("dst2") + " --layout npy --pixels");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--pixels is for --layout tar or lmdb"));
  ASSERT_EQ(Run("gen-data --out " + P("n.npy") + " --layout npy --samples 4 --sample-bytes 100 -q").code, 0);
  r = Run("convert " + P("n.npy") + " " + P("dst3") + " --layout tar --pixels");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--pixels decodes JPEG samples; the samples of "));
  EXPECT_FALSE(fs::exists(dir_ / "dst3"));
}

TEST_F(ConvertCli, ImageFolderClassesBecomeLabelsInTheIndexAndTheClsMembers) {
  for (const char* cls : {"dog", "cat", "emu"}) {
    fs::create_directories(dir_ / "src" / cls);
    for (int i = 0; i < 3; ++i) Write(std::string("src/") + cls + "/" + std::to_string(i) + ".bin", std::string(cls) + std::to_string(i));
  }
  const auto r = Run("convert " + P("src") + " " + P("dst") + " --layout tar --labels folder -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("converted 9 samples with labels"));
  const auto records = ReadIndex(P("dst/index.ftmap"));
  ASSERT_EQ(records.size(), 9u);
  // cat 0, dog 1, emu 2 (class folders in name order, as ImageFolder numbers them).
  const std::vector<int64_t> want = {0, 0, 0, 1, 1, 1, 2, 2, 2};
  for (size_t j = 0; j < 9; ++j) EXPECT_EQ(records[j].label, want[j]) << j;
  EXPECT_EQ(DstTar(P("dst")).Sample(records[4]), "dog1");
  const std::string shard = ReadFile(dir_ / "dst" / "data-00000-of-00001.tar");
  EXPECT_THAT(shard, HasSubstr("000000004.cls"));
}

TEST_F(ConvertCli, Hdf5ToEveryLayoutKeepsRowsAndLabels) {
  ASSERT_EQ(Run("gen-data --out " + P("a.h5") + " --layout hdf5 --samples 120 --sample-bytes 700 --chunk-samples 50 "
                "--compression gzip:4 -q").code, 0);
  std::vector<std::byte> row(700);
  for (const char* layout : {"tar", "hdf5", "npy", "lmdb"}) {
    const std::string out = P(std::string("dst-") + layout);
    const auto r = Run("convert " + P("a.h5") + " " + out + " --layout " + layout + " -q");
    ASSERT_EQ(r.code, 0) << layout << ": " << r.err;
    const auto records = ReadIndex(out + "/index.ftmap");
    ASSERT_EQ(records.size(), 120u) << layout;
    for (size_t j = 0; j < records.size(); ++j) {
      workloads::SyntheticDataset::FillContent(0, static_cast<int64_t>(j), row);
      EXPECT_EQ(records[j].label, workloads::Hdf5Writer::Label(static_cast<int64_t>(j))) << layout << " " << j;
      EXPECT_EQ(records[j].bytes, 700) << layout;
      if (std::string(layout) == "tar") {
        ASSERT_EQ(DstTar(out).Sample(records[j]), std::string(reinterpret_cast<const char*>(row.data()), row.size()));
      }
    }
  }
  // The HDF5 copy: the same rows and labels, read by the hdf5 workload's reader.
  workloads::FilesOptions files;
  files.path = P("dst-hdf5/data.h5");
  workloads::FormatOptions format;
  format.labels = "/labels";
  workloads::SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  const workloads::Hdf5Dataset copy(files, format, cost, workloads::CpuCalibration{});
  ASSERT_EQ(copy.size(), 120);
  std::vector<std::byte> got(static_cast<size_t>(copy.max_sample_bytes()));
  for (int64_t i : {0, 57, 119}) {
    copy.Read(i, got);
    workloads::SyntheticDataset::FillContent(0, i, row);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), got.begin())) << i;
    int64_t label = 0;
    std::memcpy(&label, got.data() + 700, 8);
    EXPECT_EQ(label, i);
  }
}

TEST_F(ConvertCli, ShuffleDealsSamplesAcrossShardsAndTheIndexKeepsTheNumbering) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 200 --sample-bytes 900 -q").code, 0);
  for (const char* out : {"a", "b"}) {
    const auto r = Run("convert " + P("src") + " " + P(out) + " --layout tar --shard-bytes 20000 --shuffle 7 -q");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  ExpectFolderSamples(P("src"), P("a"), 200);
  const auto records = ReadIndex(P("a/index.ftmap"));
  // Sample 0 and 1 are next to each other in the source; shuffled, most neighbours land in other shards.
  int same_shard = 0;
  for (size_t j = 0; j + 1 < records.size(); ++j) same_shard += records[j].file == records[j + 1].file;
  EXPECT_LT(same_shard, 100);
  // The same seed deals the same shards.
  const auto manifest = nlohmann::json::parse(ReadFile(dir_ / "a" / kManifestName));
  EXPECT_EQ(manifest.at("order").at("shuffle_seed"), 7);
  for (const auto& f : manifest.at("files")) {
    EXPECT_EQ(ReadFile(dir_ / "a" / f.get<std::string>()), ReadFile(dir_ / "b" / f.get<std::string>()));
  }
}

// kill -9 in the middle, then --resume: no partial file under a final name,
// the finished shards kept, the rest written, all verified.
TEST_F(ConvertCli, KillNineMidConvertThenResumeFinishesVerified) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 1500 --sample-bytes 40000 -q").code, 0);
  const std::string args = "convert " + P("src") + " " + P("dst") + " --layout tar --shard-bytes 400000 --shuffle 3 -q";
  const auto finished = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "dst", ec)) n += e.path().extension() == ".tar";
    return n;
  };
  const int status = testing_util::SignalFeedtuneWhen(args, [&] { return finished() >= 4; }, SIGKILL,
                                                      std::chrono::seconds(60));
  ASSERT_TRUE(WIFSIGNALED(status)) << "the convert ended before it was killed; give it more samples";
  const int kept = finished();
  ASSERT_GE(kept, 4);
  ASSERT_LT(kept, 38) << "every shard was written before the kill";
  for (const auto& e : fs::directory_iterator(dir_ / "dst")) {
    if (e.path().extension() == ".tar") ExpectWholeTar(e.path());
  }
  EXPECT_FALSE(fs::exists(dir_ / "dst" / kManifestName));
  EXPECT_TRUE(fs::exists(dir_ / "dst" / kStateName));

  const auto again = Run(args);
  EXPECT_EQ(again.code, 2);
  EXPECT_THAT(again.err, HasSubstr("holds an interrupted convert (convert-state.json); add --resume to go on"));
  const auto other = Run("convert " + P("src") + " " + P("dst") + " --layout tar --shard-bytes 400000 --shuffle 4 "
                         "--resume -q");
  EXPECT_EQ(other.code, 2);
  EXPECT_THAT(other.err, HasSubstr("--resume: " + P("dst") + " holds a convert started as"));

  const auto resumed = Run(args + " --resume --format json");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto summary = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(summary.at("samples"), 1500);
  EXPECT_GE(summary.at("resumed_files").get<int>(), kept);
  ExpectFolderSamples(P("src"), P("dst"), 1500);
  EXPECT_FALSE(fs::exists(dir_ / "dst" / kStateName));
  for (const auto& e : fs::directory_iterator(dir_ / "dst")) {
    EXPECT_FALSE(e.path().filename().string().ends_with(".partial")) << e.path();
  }
}

TEST_F(ConvertCli, CtrlCStopsWithExit130AndResumeGoesOn) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 1500 --sample-bytes 40000 -q").code, 0);
  const std::string args = "convert " + P("src") + " " + P("dst") + " --layout tar --shard-bytes 400000 -q";
  const auto written = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "dst", ec)) {
      if (e.path().extension() == ".tar") return true;
    }
    return false;
  };
  // exec: the signal goes to feedtune itself, not to a shell in front of it.
  const int status = testing_util::SignalFeedtuneWhen(args, written, SIGINT, std::chrono::seconds(60),
                                                      (dir_ / "ctrlc.err").string());
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 130) {
    EXPECT_THAT(ReadFile(dir_ / "ctrlc.err"), HasSubstr("interrupted; " + P("dst") +
                                                        " keeps the files finished so far: run the same command "
                                                        "with --resume to go on"));
    const auto resumed = Run(args + " --resume");
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_THAT(resumed.out, HasSubstr("from before"));
  } else {
    ASSERT_EQ(WEXITSTATUS(status), 0) << "neither interrupted nor done";  // it finished before the signal came
  }
  ExpectFolderSamples(P("src"), P("dst"), 1500);
}

// A write that fails mid-convert, as on a full disk: here the file-size
// limit (ulimit -f, SIGXFSZ ignored) makes write() fail with EFBIG where a
// full disk gives ENOSPC, through the same path. The convert stops naming
// the file, leaves nothing under a final name, and --resume, once there is
// room, finishes verified.
TEST_F(ConvertCli, AFailedWriteStopsNamingTheFileAndResumeFinishes) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 60 --sample-bytes 40000 -q").code, 0);
  const std::string args = "convert " + P("src") + " " + P("dst") + " --layout tar --shard-bytes 400000 -q";
  // dash counts ulimit -f in 512-byte blocks, bash in 1024: 200 is 100-200 KB, under a 400 KB shard.
  const std::string limited = "sh -c \"trap '' XFSZ; ulimit -f 200; exec " + std::string(FEEDTUNE_BINARY) + " " +
                              args + " >" + P("full.out") + " 2>" + P("full.err") + "\"";
  const int status = std::system(limited.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string err = ReadFile(dir_ / "full.err");
  EXPECT_THAT(err, HasSubstr("feedtune convert: " + P("dst") + "/.data-00000-of-"));
  EXPECT_THAT(err, HasSubstr(".tar.partial: write failed: File too large"));
  for (const auto& e : fs::directory_iterator(dir_ / "dst")) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name.starts_with(".") || name == kStateName) << name << " under a final name";
  }
  EXPECT_FALSE(fs::exists(dir_ / "dst" / kManifestName));
  const auto resumed = Run(args + " --resume");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  ExpectFolderSamples(P("src"), P("dst"), 60);
  for (const auto& e : fs::directory_iterator(dir_ / "dst")) {
    EXPECT_FALSE(e.path().filename().string().ends_with(".partial")) << e.path();
  }
}

// A shard damaged between the kill and the resume: the verification finds
// the sample, names it, and writes no manifest.
TEST_F(ConvertCli, VerificationNamesTheSampleThatDiffersFromTheSource) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 30 --sample-bytes 1000 -q").code, 0);
  // A convert stopped at once (its plan written), then given the first shard
  // of a whole convert, as if it had stopped after it; then one byte of
  // sample 3's payload flipped.
  ASSERT_EQ(Run("convert " + P("src") + " " + P("full") + " --layout tar --shard-bytes 10000 -q").code, 0);
  const auto records = ReadIndex(P("full/index.ftmap"));
  const std::string first =
      nlohmann::json::parse(ReadFile(dir_ / "full" / kManifestName)).at("files")[0].get<std::string>();
  {
    std::atomic<bool> stop{true};
    const auto source = OpenSource(P("src"), SourceOptions{});
    ConvertOptions o;
    o.layout = LayoutKind::kTar;
    o.shard_bytes = 10000;
    const auto r = Convert(*source, P("src"), P("dst"), o, {}, stop);
    ASSERT_TRUE(r.interrupted);
  }
  ASSERT_TRUE(fs::exists(dir_ / "dst" / kStateName));
  std::string shard = ReadFile(dir_ / "full" / first);
  shard[static_cast<size_t>(records[3].offset + 10)] ^= 0x5a;
  std::ofstream(dir_ / "dst" / first, std::ios::binary) << shard;
  const auto r = Run("convert " + P("src") + " " + P("dst") + " --layout tar --shard-bytes 10000 --resume -q");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("verification failed: sample 3 (" + P("src") + "/00000/000000003.bin): " +
                               P("dst") + "/" + first + " member 000000003.bin holds 1000 bytes with CRC32C"));
  EXPECT_FALSE(fs::exists(dir_ / "dst" / kManifestName));
}

TEST_F(ConvertCli, BadJpegIsNamedAndSkipBadListsIt) {
  ASSERT_EQ(Run("gen-data --out " + P("jpeg") + " --layout jpeg --samples 12 --image-size 64x48 -q").code, 0);
  fs::resize_file(dir_ / "jpeg" / "00000" / "000000005.jpg", 600);
  const auto r = Run("convert " + P("jpeg") + " " + P("dst") + " --layout tar -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("sample 5 (" + P("jpeg") + "/00000/000000005.jpg): " + P("jpeg") +
                               "/00000/000000005.jpg: does not decode as a JPEG"));
  EXPECT_THAT(r.err, HasSubstr("--skip-bad leaves such samples out and lists them"));
  const auto skipped = Run("convert " + P("jpeg") + " " + P("dst2") + " --layout lmdb --skip-bad -q --format json");
  ASSERT_EQ(skipped.code, 0) << skipped.err;
  const auto summary = nlohmann::json::parse(skipped.out);
  EXPECT_EQ(summary.at("samples"), 11);
  ASSERT_EQ(summary.at("skipped").size(), 1u);
  EXPECT_EQ(summary.at("skipped")[0].at("source"), 5);
  EXPECT_THAT(skipped.err, HasSubstr("convert: skipped sample 5: "));
  const auto records = ReadIndex(P("dst2/index.ftmap"));
  ASSERT_EQ(records.size(), 11u);
  EXPECT_EQ(records[4].source, 4);
  EXPECT_EQ(records[5].source, 6);
  const auto manifest = nlohmann::json::parse(ReadFile(dir_ / "dst2" / kManifestName));
  EXPECT_EQ(manifest.at("skipped")[0].at("source"), 5);
}

TEST_F(ConvertCli, TruncatedSourcesAreRefusedNamingTheFile) {
  ASSERT_EQ(Run("gen-data --out " + P("a.h5") + " --layout hdf5 --samples 100 --sample-bytes 1000 -q").code, 0);
  fs::resize_file(dir_ / "a.h5", 50000);
  auto r = Run("convert " + P("a.h5") + " " + P("dst") + " --layout tar -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(P("a.h5") + ": cannot open as HDF5"));
  EXPECT_THAT(r.err, HasSubstr("truncated"));
  EXPECT_FALSE(fs::exists(dir_ / "dst"));

  // A tar shard cut on a block boundary: the scanner alone would read fewer samples.
  ASSERT_EQ(Run("gen-data --out " + P("tars") + " --layout tar --shards 2 --samples 20 --sample-bytes 100 -q").code, 0);
  fs::resize_file(dir_ / "tars" / "data-00001-of-00002.tar", 4096);
  r = Run("convert " + P("tars") + " " + P("dst") + " --layout tar -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(P("tars") + "/data-00001-of-00002.tar: truncated: no end-of-archive blocks after its "
                               "last member"));
  // Cut inside a member: the scanner's own error, with the offset.
  fs::resize_file(dir_ / "tars" / "data-00001-of-00002.tar", 3000);
  r = Run("convert " + P("tars") + " " + P("dst") + " --layout tar -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(P("tars") + "/data-00001-of-00002.tar"));
}

TEST_F(ConvertCli, DestinationMistakesAreRefusedBeforeAnythingIsWritten) {
  ASSERT_EQ(Run("gen-data --out " + P("src") + " --layout files --samples 10 --sample-bytes 100 -q").code, 0);
  const auto before = Snapshot(P("src"));
  auto r = Run("convert " + P("src") + " " + P("src/sub/dst") + " --layout tar -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("DST " + P("src/sub/dst") + " is inside SRC " + P("src") +
                               ": the converted files would change the source"));
  r = Run("convert " + P("src") + " " + P("src") + " --layout tar -q");
  EXPECT_THAT(r.err, HasSubstr("is SRC itself"));
  EXPECT_EQ(Snapshot(P("src")), before);

  ASSERT_EQ(Run("convert " + P("src") + " " + P("done") + " --layout tar -q").code, 0);
  r = Run("convert " + P("src") + " " + P("done") + " --layout lmdb -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("DST " + P("done") + " already holds a converted dataset (10 samples of "));
  fs::create_directories(dir_ / "other");
  Write("other/notes.txt", "mine");
  r = Run("convert " + P("src") + " " + P("other") + " --layout tar -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("DST " + P("other") + " holds other files (notes.txt...)"));
  EXPECT_EQ(ReadFile(dir_ / "other" / "notes.txt"), "mine");
  r = Run("convert " + P("src") + " " + P("new") + " --layout tar --resume -q");
  EXPECT_THAT(r.err, HasSubstr("--resume: " + P("new") + " does not exist"));
  r = Run("convert " + P("src") + " " + P("h") + " --layout hdf5 --shuffle 1 -q");
  EXPECT_THAT(r.err, HasSubstr("--shuffle is for --layout tar"));
  r = Run("convert " + P("src") + " " + P("h") + " --layout parquet -q");
  EXPECT_THAT(r.err, HasSubstr("--layout: expected tar | hdf5 | npy | lmdb, got 'parquet'"));
}

TEST_F(ConvertCli, SamplesOfManySizesAreRefusedByTheRowLayouts) {
  fs::create_directories(dir_ / "src");
  Write("src/a.bin", "12345");
  Write("src/b.bin", "123");
  const auto r = Run("convert " + P("src") + " " + P("dst") + " --layout npy -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("the samples of the source differ in size, and --layout npy stores rows of one size; "
                               "use --layout tar or lmdb"));
  EXPECT_EQ(Run("convert " + P("src") + " " + P("dst2") + " --layout lmdb -q").code, 0);
}

// A file of the source that cannot be read once the convert has started
// (removed, or unreadable): the convert names it; --skip-bad goes on.
TEST(ConvertLibrary, UnreadableFileIsNamedAndSkipBadGoesOn) {
  const fs::path dir = fs::temp_directory_path() / ("feedtune-convert-unreadable-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "src");
  for (int i = 0; i < 5; ++i) std::ofstream(dir / "src" / (std::to_string(i) + ".bin")) << "sample" << i;
  const auto source = OpenSource((dir / "src").string(), SourceOptions{});
  fs::remove(dir / "src" / "2.bin");
  std::atomic<bool> stop{false};
  ConvertOptions o;
  o.layout = LayoutKind::kTar;
  try {
    Convert(*source, (dir / "src").string(), (dir / "out").string(), o, {}, stop);
    ADD_FAILURE() << "a missing file converted";
  } catch (const ConvertUsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sample 2 (" + (dir / "src" / "2.bin").string() + "): "));
    EXPECT_THAT(e.what(), HasSubstr("cannot open: No such file or directory"));
  }
  o.skip_bad = true;
  const auto r = Convert(*source, (dir / "src").string(), (dir / "out2").string(), o, {}, stop);
  EXPECT_EQ(r.samples, 4);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].source, 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace feedtune::layout
